"""kg-mcp: knowledge-graph tools for LLMs over the Model Context Protocol."""

__version__ = "0.1.0"
