"""The `kg-mcp` command line: the top layer, above both the server and the method drivers."""

from kg_mcp.cli import (  # noqa: F401  (registers the commands on `main`)
    agent_commands,
    client_commands,
    config_commands,
    ranking_commands,
    server_commands,
    team_commands,
)
from kg_mcp.cli.agent_commands import _BENCHMARKS
from kg_mcp.cli.common import main

__all__ = ["main", "_BENCHMARKS"]
