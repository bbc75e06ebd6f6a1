"""The scopes a token must carry: `kg:read` for everything the server offers, `kg:sparql` as well
for the `sparql` tool. Graph scopes (kg_mcp.access) only choose which named graphs a caller reads.

Over stdio and on a server without auth there is no token, and nothing is held back.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp.server.auth.middleware.auth_context import get_access_token

from kg_mcp.backends.graph_access import ALL_GRAPHS_SCOPE

READ = "kg:read"
SPARQL = "kg:sparql"
KNOWN = (READ, SPARQL)  # listed in the Protected Resource Metadata, with the graph scopes
FULL = (READ, SPARQL, ALL_GRAPHS_SCOPE)  # what the one shared token of --auth-token-env carries

# Tools that need more than READ, and the scopes they need.
TOOL_SCOPES: dict[str, tuple[str, ...]] = {"sparql": (READ, SPARQL)}


def needed_for_tool(name: str) -> tuple[str, ...]:
    """The scopes a call of tool `name` needs.

    >>> needed_for_tool("search"), needed_for_tool("sparql")
    (('kg:read',), ('kg:read', 'kg:sparql'))
    """
    return TOOL_SCOPES.get(name, (READ,))


def missing_for_tool(name: str, scopes: Iterable[str]) -> list[str]:
    """The scopes of `needed_for_tool(name)` that `scopes` lacks (empty: the call may go ahead)."""
    held = set(scopes)
    return [scope for scope in needed_for_tool(name) if scope not in held]


def tool_allowed(name: str) -> bool:
    """Whether the caller of the request being served may see and call tool `name`: always when it
    sent no token (stdio, in-process use, a server without auth)."""
    token = get_access_token()
    return token is None or not missing_for_tool(name, token.scopes)
