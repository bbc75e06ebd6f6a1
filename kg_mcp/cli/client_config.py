"""`kg-mcp config CLIENT`: the snippet that makes an MCP client start this installation's server,
and its merge into the client's own config file (shown first as a diff, the old file kept as .bak).

Each client keeps its servers under its own key and file; the entry is the same everywhere:
this Python's absolute path running `-m kg_mcp serve` with the serve options given.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from kg_mcp.errors import ConfigError


@dataclass(frozen=True)
class ClientKind:
    key: str  # where the servers live in the client's JSON
    typed: bool  # entries carry "type": "stdio"
    where: str  # how to find its user-level config file, for the help text


CLIENTS = {
    "claude-desktop": ClientKind("mcpServers", False, "claude_desktop_config.json in Claude's settings folder"),
    "claude-code": ClientKind("mcpServers", True, "~/.claude.json (user scope)"),
    "vscode": ClientKind("servers", True, "mcp.json in VS Code's user folder"),
    "cursor": ClientKind("mcpServers", False, "~/.cursor/mcp.json"),
}


def config_path(client: str) -> Path:
    """The client's user-level config file on this platform (it may not exist yet)."""
    home = Path.home()
    if sys.platform == "darwin":
        app_support = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        app_support = Path(os.environ.get("APPDATA", home / "AppData" / "Roaming"))
    else:
        app_support = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return {
        "claude-desktop": app_support / "Claude" / "claude_desktop_config.json",
        "claude-code": home / ".claude.json",
        "vscode": app_support / "Code" / "User" / "mcp.json",
        "cursor": home / ".cursor" / "mcp.json",
    }[client]


def server_entry(client: str, serve_args: list[str]) -> dict:
    """One server entry: absolute paths only, so the client can start it from anywhere."""
    entry = {"command": sys.executable, "args": ["-m", "kg_mcp", "serve", *serve_args]}
    return {"type": "stdio", **entry} if CLIENTS[client].typed else entry


def snippet(client: str, name: str, serve_args: list[str]) -> dict:
    return {CLIENTS[client].key: {name: server_entry(client, serve_args)}}


def merged(client: str, path: Path, name: str, serve_args: list[str]) -> tuple[str, str]:
    """(the file's text now, its text with our entry merged in); everything else is kept."""
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        config = json.loads(before) if before.strip() else {}
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path} is not plain JSON ({e}); add the snippet by hand (kg-mcp config {client})") from None
    if not isinstance(config, dict) or not isinstance(config.get(CLIENTS[client].key, {}), dict):
        raise ConfigError(f"{path}: expected a JSON object with an object under {CLIENTS[client].key!r}")
    config.setdefault(CLIENTS[client].key, {})[name] = server_entry(client, serve_args)
    return before, json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def diff(path: Path, before: str, after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"{path} (now)", f"{path} (new)")
    return "".join(lines)


def write(path: Path, before: str, after: str) -> Path | None:
    """Write `after`, keeping the old file as PATH.bak; the backup's path, or None for a new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if path.exists():
        backup = path.with_name(path.name + ".bak")
        shutil.copy2(path, backup)
    temporary = path.with_name(path.name + ".kg-mcp-new")
    temporary.write_text(after, encoding="utf-8")
    temporary.replace(path)  # atomic: the client never reads half a file
    return backup


def serve_args(store, sparql_url, wikidata, profile, languages, enable_sparql, graphs=()) -> list[str]:
    """The serve options as arguments, paths made absolute."""
    args: list[str] = []
    if store:
        args += ["--store", str(Path(store).resolve())]
    if sparql_url:
        args += ["--sparql", sparql_url]
    if wikidata:
        args.append("--wikidata")
    if profile:
        args += ["--profile", profile]
    for graph in graphs:
        args += ["--graph", graph]
    for language in languages:
        args += ["--language", language]
    if enable_sparql is not None:
        args.append("--enable-sparql" if enable_sparql else "--no-sparql")
    return args
