"""Serving an MCP server to clients: the transports (stdio, streamable HTTP, SSE) and what guards
them (connection and session caps, Host/Origin and JSON-RPC checks, rate limits, bearer auth).

`serve` (kg_mcp.serving.app) wires them together; each guard is a module of its own. This package
sits beside kg_mcp.server, which builds the MCP server object (tools, resources, prompts): the
command line builds one and hands it here.
"""

from kg_mcp.serving.app import Transport, serve
from kg_mcp.serving.limits import HttpLimits

__all__ = ["HttpLimits", "Transport", "serve"]
