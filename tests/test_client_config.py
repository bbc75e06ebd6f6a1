"""`kg-mcp config CLIENT`: snippets with absolute paths, merged into each client's file under a
temporary HOME, with a diff first and a backup kept; the written entry starts a working server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from test_transports import DEMO_TTL

FILES = {
    "claude-desktop": (".config/Claude/claude_desktop_config.json", "mcpServers"),
    "claude-code": (".claude.json", "mcpServers"),
    "vscode": (".config/Code/User/mcp.json", "servers"),
    "cursor": (".cursor/mcp.json", "mcpServers"),
}


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return home


def kg_mcp(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "KG_MCP_"))} | {"HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "kg_mcp", "config", *args], capture_output=True, text=True,
                          env=env, cwd=home, timeout=60)
    assert (done.returncode == 0) == ok, done.stderr
    return done


@pytest.mark.parametrize("client", sorted(FILES))
def test_snippet_has_absolute_paths(home, client):
    (home / "my.store").mkdir()
    out = json.loads(kg_mcp(home, client, "--store", "my.store", "--enable-sparql").stdout)
    _, key = FILES[client]
    entry = out[key]["kg-mcp"]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).exists()
    assert entry["args"] == ["-m", "kg_mcp", "serve", "--store", str(home / "my.store"), "--enable-sparql"]
    assert ("type" in entry) == (client in ("claude-code", "vscode"))


@pytest.mark.parametrize("client", sorted(FILES))
def test_write_merges_shows_the_diff_and_keeps_a_backup(home, client):
    relative, key = FILES[client]
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    old = {key: {"other": {"command": "other-server"}}, "unrelated": [1, 2]}
    path.write_text(json.dumps(old))
    done = kg_mcp(home, client, "--wikidata", "--write")
    assert done.stdout == ""  # everything for people goes to stderr
    assert f"+++ {path} (new)" in done.stderr and "+    \"kg-mcp\": {" in done.stderr
    new = json.loads(path.read_text())
    assert new["unrelated"] == [1, 2] and new[key]["other"] == {"command": "other-server"}
    assert new[key]["kg-mcp"]["args"][-2:] == ["serve", "--wikidata"]
    assert json.loads(path.with_name(path.name + ".bak").read_text()) == old
    again = kg_mcp(home, client, "--wikidata", "--write")
    assert "nothing to change" in again.stderr and json.loads(path.read_text()) == new


def test_write_creates_a_missing_file_and_refuses_broken_json(home):
    kg_mcp(home, "cursor", "--write")
    path = home / ".cursor" / "mcp.json"
    assert json.loads(path.read_text())["mcpServers"]["kg-mcp"]["args"] == ["-m", "kg_mcp", "serve"]
    assert not path.with_name("mcp.json.bak").exists()
    path.write_text("{ // a comment\n}")
    refused = kg_mcp(home, "cursor", "--write", ok=False)
    assert "is not plain JSON" in refused.stderr and "add the snippet by hand" in refused.stderr
    assert path.read_text() == "{ // a comment\n}"


def test_the_written_entry_starts_a_server(home, tmp_path):
    from kg_mcp.loading import load_sources

    store = tmp_path / "demo.store"
    load_sources([DEMO_TTL], store, progress=False)
    kg_mcp(home, "claude-desktop", "--store", str(store), "--write")
    entry = json.loads((home / FILES["claude-desktop"][0]).read_text())["mcpServers"]["kg-mcp"]

    async def tools():
        # A client starts it from its own folder, with its own environment.
        params = StdioServerParameters(command=entry["command"], args=entry["args"], cwd=str(home),
                                       env={"PATH": os.environ["PATH"], "HOME": str(home)})
        async with Client(params) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert {"search", "verify", "find_entities"} <= asyncio.run(tools())
