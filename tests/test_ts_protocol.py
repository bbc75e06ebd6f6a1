"""The MCP TypeScript SDK's client (from npm, in .npm-tools/ by `make install-test`) against `kg-mcp
serve` over stdio: it completes an entity id from a typed name and reads that entity's card,
completes a prompt argument, gets progress from a follow, gets -32602 for an unknown tool, an
unknown prompt, a missing prompt argument and an unknown entity's card, and receives the server's
log records at the level it set (a real SPARQL endpoint behind the fault proxy fails once per call,
and the retry is logged). The node script is tests/js/ts_protocol_client.mjs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fault_proxy import Fault, FaultProxy

ROOT = Path(__file__).resolve().parents[1]
NPM_TOOLS = ROOT / ".npm-tools"


def ts_protocol(part: str, command: list[str], *more: str) -> dict:
    if not (NPM_TOOLS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("the MCP TypeScript SDK is missing: run `make install-test`")
    script = NPM_TOOLS / "ts_protocol_client.mjs"
    # Copied whole, then renamed: a test on another xdist worker may be running node on the same file.
    staged = NPM_TOOLS / f".ts_protocol_client.mjs.{os.getpid()}"
    shutil.copy(ROOT / "tests" / "js" / "ts_protocol_client.mjs", staged)
    os.replace(staged, script)
    done = subprocess.run(["node", str(script), part, json.dumps(command), *more], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_completion_cards_progress_and_errors(metaqa_store_dir):
    out = ts_protocol("store", [sys.executable, "-m", "kg_mcp", "serve", "--store", str(metaqa_store_dir)])
    assert "completions" in out["capabilities"] and "logging" in out["capabilities"]
    assert out["templates"] == ["kg://entity/{id}"] and len(out["resources"]) <= 6
    assert out["completed"]["values"][0] == "kg:Catch_Me_If_You_Can"
    assert out["card"]["mimeType"] == "text/markdown" and out["card"]["text"].startswith("# kg:Catch_Me_If_You_Can")
    assert "who directed Catch Me If You Can" in out["question"]["values"]
    assert not out["followError"]
    # (those read with the result reach this client's onerror rather than onprogress: counted too)
    hops = [(p["progress"], p["total"], p["message"]) for p in out["progress"]]
    assert hops == [(0, 2, "hop 1 of 2"), (1, 2, "hop 2 of 2")]
    claims = [p["progress"] for p in out["verifyProgress"]]
    assert claims == sorted(set(claims)) and len(claims) >= 10 and {p["total"] for p in out["verifyProgress"]} == {40}
    errors = out["errors"]
    assert {e["code"] for e in errors.values()} == {-32602}, errors
    assert "Unknown tool: 'no_such_tool'" in errors["tool"]["message"]
    assert "Unknown prompt: 'no_such_prompt'" in errors["prompt"]["message"]
    assert "Prompt ground_answer: missing answer" in errors["missing"]["message"]
    assert "kg:No_Such_Film_At_All is not in the KG" in errors["card"]["message"]


@pytest.mark.parametrize("level", ["info", "error"])
def test_log_records_at_the_level_the_client_set(oxigraph_endpoint, level):
    with FaultProxy(oxigraph_endpoint) as proxy:
        proxy.add(Fault.error(503), match="Q42>", times=1)  # the endpoint fails once: retried, logged at info
        out = ts_protocol("logs", [
            sys.executable, "-m", "kg_mcp", "-v", "serve", "--sparql", proxy.url, "--profile", "wikidata",
        ], level)
        assert proxy.count(kind="status") == 1
    assert not out["isError"]
    retried = [m for m in out["logs"] if "retrying" in str(m["data"])]
    if level == "info":
        assert retried and retried[0]["level"] == "info" and retried[0]["logger"] == "kg_mcp.backends.http_transport"
        assert "503" in retried[0]["data"]
    else:
        assert retried == []  # at "error" the retry is not sent
