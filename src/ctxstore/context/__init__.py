"""Context fragments, their renderers and the context engine."""
