"""The MCP TypeScript SDK's client (from npm, installed by `make install-test` into .npm-tools/)
lists and calls every kg-mcp tool over stdio, streamable HTTP with a bearer token, and SSE.

The node script is tests/js/ts_sdk_client.mjs; it runs from .npm-tools/ so that node finds the SDK.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kg_mcp.loading import load_sources
from test_transports import DEMO_TTL, TOKEN, http_server

ROOT = Path(__file__).resolve().parents[1]
NPM_TOOLS = ROOT / ".npm-tools"

# One call per tool that must succeed on the demo KG. A new tool fails the test until it has one here.
EXAMPLES = {
    "search": {"entity": "wd:Q5582"},
    "follow": {"paths": [["wd:Q9883", "~wdt:P19"], ["wd:Q1028181", "~wdt:P106"]]},  # painters born in Zundert
    "get_relations": {"entity": "wd:Q5582"},
    "explore_kg": {"entity": "wd:Q5582", "relations": ["wdt:P31"]},
    "verify": {"claims": [{"subject": "wd:Q5582", "relation": "wdt:P31", "object": "wd:Q5"}]},
    "find_entities": {"name": "Vincent van Gogh"},
    "kgr_search": {"entity": "wd:Q5582", "question": "Where was Vincent van Gogh born?"},
    "sparql": {"query": "SELECT ?p WHERE { <http://www.wikidata.org/entity/Q5582> ?p ?o } LIMIT 1"},
}


def ts_client(kind: str, target: str, token: str | None = None) -> dict:
    if not (NPM_TOOLS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("the MCP TypeScript SDK is missing: run `make install-test`")
    script = NPM_TOOLS / "ts_sdk_client.mjs"
    # Copied whole, then renamed: a test on another xdist worker may be running node on the same file.
    staged = NPM_TOOLS / f".ts_sdk_client.mjs.{os.getpid()}"
    shutil.copy(ROOT / "tests" / "js" / "ts_sdk_client.mjs", staged)
    os.replace(staged, script)
    env = {k: v for k, v in os.environ.items() if k != "KG_MCP_TOKEN"} | ({"KG_MCP_TOKEN": token} if token else {})
    done = subprocess.run(["node", str(script), kind, target, json.dumps(EXAMPLES)],
                          capture_output=True, text=True, env=env, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def check(out: dict) -> None:
    names = [t["name"] for t in out["tools"]]
    assert set(names) <= set(EXAMPLES) and {"search", "verify", "sparql"} <= set(names)
    assert set(out["calls"]) == set(names)
    for name, call in out["calls"].items():
        assert not call["isError"], (name, call["text"][:500])
        assert name == "sparql" or "Q5582" in call["text"] or "Vincent van Gogh" in call["text"], (name, call["text"][:200])
    assert "1 row" in out["calls"]["sparql"]["text"], out["calls"]["sparql"]["text"]
    assert "kg://schema" in out["resources"] and out["prompts"]


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("stores") / "demo"
    load_sources([DEMO_TTL], store, progress=False)
    return store


def test_stdio(demo_store):
    check(ts_client("stdio", json.dumps([sys.executable, "-m", "kg_mcp", "serve", "--store", str(demo_store), "--enable-sparql"])))


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_http_with_token_and_sse(demo_store, transport, monkeypatch):
    monkeypatch.setenv("KG_MCP_SPARQL_TOOL", "true")
    with http_server(demo_store, transport, token=TOKEN) as (base, _):
        check(ts_client(transport, base + ("/mcp" if transport == "http" else "/sse"), token=TOKEN))
