"""Prompt files (markdown): editable without touching code; read through kg_mcp.prompt_files."""
