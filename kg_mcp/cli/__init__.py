"""The `kg-mcp` command line: the top layer, above both the server and the method drivers."""

from kg_mcp.cli import agent_commands, config_commands, ranking_commands, server_commands, team_commands  # noqa: F401  (registers the commands on `main`)
from kg_mcp.cli.agent_commands import _BENCHMARKS
from kg_mcp.cli.common import main

__all__ = ["main", "_BENCHMARKS"]
