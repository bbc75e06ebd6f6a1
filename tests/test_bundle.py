"""The MCP Bundle: manifest.json passes the official CLI (`mcpb validate`, `mcpb pack`, from npm
into .npm-tools/ by `make install-test`), and its mcp_config, filled in the way a host fills it,
starts a server on the configured KG."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from kg_mcp.loading import load_sources
from test_transports import DEMO_TTL

ROOT = Path(__file__).resolve().parents[1]
MCPB = ROOT / ".npm-tools" / "node_modules" / ".bin" / "mcpb"
MANIFEST = json.loads((ROOT / "manifest.json").read_text())


def mcpb(*args) -> subprocess.CompletedProcess:
    if not MCPB.exists():
        pytest.fail("the MCP Bundle CLI is missing: run `make install-test`")
    return subprocess.run([str(MCPB), *map(str, args)], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_manifest_validates_and_packs(tmp_path):
    checked = mcpb("validate", ROOT / "manifest.json")
    assert checked.returncode == 0 and "validation passes" in checked.stdout, checked.stdout + checked.stderr
    packed = mcpb("pack", ROOT, tmp_path / "kg-mcp.mcpb")
    assert packed.returncode == 0, packed.stdout + packed.stderr
    names = set(zipfile.ZipFile(tmp_path / "kg-mcp.mcpb").namelist())
    assert {"manifest.json", "pyproject.toml", "kg_mcp/__main__.py", "kg_mcp/demo/demo.ttl", "agents/ask.py"} <= names
    assert not any(n.startswith((".venv/", ".npm-tools/", "tests/", ".git/")) for n in names)


def test_manifest_matches_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert MANIFEST["version"] == project["version"]
    assert MANIFEST["server"]["type"] == "uv" and MANIFEST["server"]["mcp_config"]["args"][-2:] == ["kg-mcp", "serve"]
    assert set(MANIFEST["user_config"]) == {"store", "sparql_url", "graphs", "wikidata", "enable_sparql"}


def host_env(values: dict[str, object]) -> dict[str, str]:
    """mcp_config.env with ${user_config.X} replaced as a host does: the user's value, else the default."""
    def fill(text: str) -> str:
        def one(match):
            key = match.group(1)
            value = values.get(key, MANIFEST["user_config"][key].get("default", ""))
            return json.dumps(value) if isinstance(value, bool) else str(value)
        return re.sub(r"\$\{user_config\.(\w+)\}", one, text)

    return {name: fill(text) for name, text in MANIFEST["server"]["mcp_config"]["env"].items()}


async def served(env: dict[str, str]):
    # The bundle's `uv run --directory DIR kg-mcp serve`, with this checkout's installed kg-mcp.
    params = StdioServerParameters(command=sys.executable, args=["-m", "kg_mcp", "serve"], env=dict(os.environ) | env)
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        stats = json.loads((await client.read_resource("kg://stats")).contents[0].text)
        return tools, stats


def test_user_config_reaches_the_server(tmp_path):
    store = tmp_path / "demo.store"
    load_sources([DEMO_TTL], store, progress=False)
    defaults_tools, defaults_stats = asyncio.run(served(host_env({})))
    store_tools, store_stats = asyncio.run(served(host_env({"store": str(store), "enable_sparql": False})))
    assert "sparql" in defaults_tools and "sparql" not in store_tools  # offered unless turned off
    assert store_stats["kind"] == "oxigraph" and str(store) in json.dumps(store_stats)
    assert str(store) not in json.dumps(defaults_stats)
