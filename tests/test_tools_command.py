"""`kg-mcp tools`: any MCP server's tools (with arguments), resources and prompts, from a KG served
in-process, a server spawned over stdio, and one over streamable HTTP with a bearer token."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kg_mcp.loading import load_sources
from test_transports import DEMO_TTL, TOKEN, http_server


def kg_mcp(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "kg_mcp", "tools", *args], capture_output=True, text=True,
                          timeout=90, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_lists_the_demo_kg_with_arguments():
    out = kg_mcp("--enable-sparql").stdout
    assert out.startswith("tools (")
    assert '      direction ("outgoing" | "incoming", default "outgoing"): outgoing:' in out
    assert "      entity (string, required): " in out and "      limit (integer, default 10): " in out
    assert "\n  sparql: " in out and "\n  kg://stats: " in out and "\n  ground_answer(question, answer): " in out


def test_a_spawned_server_and_an_http_server_with_a_token(tmp_path):
    store = tmp_path / "demo.store"
    load_sources([DEMO_TTL], store, progress=False)
    # Over stdio sparql is offered by default, over HTTP not: --no-sparql makes the two alike.
    spawned = json.loads(kg_mcp("--server-cmd", f"{sys.executable} -m kg_mcp serve --store {store} --no-sparql", "--json").stdout)
    with http_server(store, "http", token=TOKEN) as (base, _):
        env = dict(os.environ, KG_TOKEN=TOKEN)
        over_http = json.loads(kg_mcp("--url", base + "/mcp", "--auth-token-env", "KG_TOKEN", "--json", env=env).stdout)
        refused = subprocess.run([sys.executable, "-m", "kg_mcp", "tools", "--url", base + "/mcp"],
                                 capture_output=True, text=True, timeout=90)
    assert spawned == over_http
    assert {t["name"] for t in spawned["tools"]} >= {"search", "get_relations", "explore_kg", "verify", "find_entities"}
    relations = next(t for t in spawned["tools"] if t["name"] == "get_relations")
    assert relations["inputSchema"]["required"] == ["entity"]
    search = next(t for t in spawned["tools"] if t["name"] == "search")  # entity or entities: neither required
    assert {"entity", "entities"} <= set(search["inputSchema"]["properties"]) and "required" not in search["inputSchema"]
    assert {r["uri"] for r in spawned["resources"]} >= {"kg://schema", "kg://stats"}
    assert refused.returncode == 1 and "refused the request (HTTP 401)" in refused.stderr
