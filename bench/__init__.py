"""kg-mcp's benchmark suite: `python -m bench [--quick]` (see README, Performance)."""
