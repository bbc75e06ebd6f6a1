"""kg-mcp's benchmark suite: `python -m bench [--quick]` (see docs/performance.md)."""
