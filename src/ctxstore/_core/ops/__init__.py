"""Store operations by family: each function builds the calls of one operation (no I/O)."""
