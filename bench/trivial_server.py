"""The SDK's own trivial tool, over stdio or streamable HTTP: the baseline for protocol costs.

    python bench/trivial_server.py stdio
    python bench/trivial_server.py http PORT
"""

from __future__ import annotations

import sys

from mcp.server import MCPServer

server = MCPServer("trivial")


@server.tool()
def ping() -> str:
    """Answer at once."""
    return "pong"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
