"""A whole chat out (export) and in (import), in bounded chunks."""
