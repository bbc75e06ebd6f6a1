"""The MCP server over its real transports: stdio, streamable HTTP (with bearer auth) and SSE.

Servers run as real `python -m kg_mcp serve` subprocesses on free loopback ports and talk to the
SDK's own clients; the in-memory tests drive `build_server` through `Client(server)`.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from conftest import INITIALIZE, MCP_HEADERS, free_port, wait_for_http
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.server import build_server

TOKEN = "kgmcp-test-token-0123456789abcdef"  # 32+ characters, as a real deployment would use
assert len(TOKEN) >= 32
TOOLS = {"search", "get_relations", "explore_kg", "verify", "find_entities"}
DEMO_TTL = Path(__file__).resolve().parents[1] / "kg_mcp" / "demo" / "demo.ttl"


def kg_mcp_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "kg_mcp", *args]


@contextmanager
def http_server(store: Path, transport: str, token: str | None = None):
    """`kg-mcp serve --transport http|sse` on a free loopback port; yields (base_url, process).

    The process is always terminated; its stdout/stderr go to files read by the caller afterwards.
    """
    port = free_port()
    args = ["serve", "--store", str(store), "--transport", transport, "--port", str(port)]
    env = dict(os.environ)
    env.pop("KGTOK", None)
    if token:
        args += ["--auth-token-env", "KGTOK"]
        env["KGTOK"] = token
    process = subprocess.Popen(kg_mcp_cmd(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_for_http(base + "/", timeout=30)
        except TimeoutError:
            process.terminate()
            out, err = process.communicate(timeout=10)
            pytest.fail(f"kg-mcp serve did not start (rc={process.returncode}): {err.decode()[-2000:]}")
        yield base, process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def finish(process: subprocess.Popen) -> tuple[str, str]:
    """Stop a server and return what it wrote on stdout and stderr."""
    if process.poll() is None:
        process.terminate()
    out, err = process.communicate(timeout=10)
    return out.decode(errors="replace"), err.decode(errors="replace")


def rows_of(result) -> list[tuple[str, str | None]]:
    """(property, value label) pairs of a search result's structured rows."""
    return [(row["property"], row["value"]["label"]) for row in result.structured_content["rows"]]


# --- stdio -------------------------------------------------------------------------------------


async def test_stdio_catch_me_if_you_can_directed_by_spielberg(metaqa_store_dir):
    """The issue's 'done when': over stdio, find the film's id, then search it outgoing."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kg_mcp", "serve", "--store", str(metaqa_store_dir)], env=dict(os.environ)
    )
    async with Client(params) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert TOOLS <= set(tools)
        assert "sparql" in tools  # over stdio the caller owns the data: offered unless --no-sparql
        for name in [*TOOLS, "sparql"]:
            assert tools[name].annotations.read_only_hint is True, name
            assert tools[name].annotations.destructive_hint is False, name
            assert tools[name].input_schema["type"] == "object"

        found = await client.call_tool("find_entities", {"name": "Catch Me If You Can"})
        assert not found.is_error, found.content
        entities = found.structured_content["entities"]
        assert entities and entities[0]["label"] == "Catch Me If You Can"
        film = entities[0]["id"]
        assert film in found.content[0].text

        result = await client.call_tool("search", {"entity": film, "direction": "outgoing"})
        assert not result.is_error, result.content
        assert ("directed_by", "Steven Spielberg") in rows_of(result)
        text = result.content[0].text
        assert any("directed_by" in line and "Steven Spielberg" in line for line in text.splitlines())


def _stdio_kg_args(metaqa_store_dir: Path) -> list[str]:
    # The demo KG when it ships; the MetaQA store otherwise.
    return ["serve"] if DEMO_TTL.exists() else ["serve", "--store", str(metaqa_store_dir)]


def _read_json_lines(process: subprocess.Popen, count: int, timeout: float = 30) -> list[dict]:
    messages = []
    deadline = time.monotonic() + timeout
    while len(messages) < count:
        assert time.monotonic() < deadline, f"no answer on stdout after {messages}"
        line = process.stdout.readline()
        assert line, f"stdout closed early; stderr: {process.stderr.read().decode()[-2000:]}"
        message = json.loads(line)  # every stdout line is one JSON-RPC message
        assert message["jsonrpc"] == "2.0"
        messages.append(message)
    return messages


def test_stdio_stdout_carries_only_protocol(metaqa_store_dir):
    process = subprocess.Popen(
        kg_mcp_cmd("-v", *_stdio_kg_args(metaqa_store_dir)),  # -v: logging on, and still only on stderr
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def send(message) -> None:
            line = message if isinstance(message, str) else json.dumps(message)
            process.stdin.write(line.encode() + b"\n")
            process.stdin.flush()

        send(INITIALIZE)
        [init] = _read_json_lines(process, 1)
        assert init["id"] == 1 and init["result"]["serverInfo"]["name"] == "kg-mcp"
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # A tool error and garbage must not leak anything but protocol onto stdout.
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {"entity": "kg:Nope_Nothing"}}})
        send("this is not JSON at all {{{")
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        answers = {m["id"]: m for m in _read_json_lines(process, 2) if "id" in m}
        assert answers[2]["result"]["isError"] is True
        assert "Traceback" not in answers[2]["result"]["content"][0]["text"]
        assert TOOLS <= {t["name"] for t in answers[3]["result"]["tools"]}

        process.stdin.close()  # EOF: the server must exit on its own
        rc = process.wait(timeout=20)
        rest = process.stdout.read().decode()
        stderr = process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert rc == 0, stderr[-2000:]
    for line in rest.splitlines():
        if line.strip():
            assert json.loads(line)["jsonrpc"] == "2.0", line
    assert "Traceback" not in stderr


# --- streamable HTTP with bearer auth ----------------------------------------------------------


async def test_http_bearer_auth_and_dns_rebinding(metaqa_store_dir):
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"entity": "kg:Catch_Me_If_You_Can"}},
    }
    with http_server(metaqa_store_dir, "http", TOKEN) as (base, process):
        url = base + "/mcp"
        async with httpx2.AsyncClient(timeout=30) as raw:
            for headers in ({}, {"Authorization": "Bearer " + "x" * len(TOKEN)}, {"Authorization": "Bearer " + TOKEN[:-1]}, {"Authorization": TOKEN}):
                for body in (INITIALIZE, call):
                    response = await raw.post(url, json=body, headers=MCP_HEADERS | headers)
                    assert response.status_code == 401, (headers, response.text)
                    assert response.headers["www-authenticate"].startswith("Bearer")
                    assert "Spielberg" not in response.text and "result" not in response.json()
            # DNS rebinding: a page on evil.example resolving to 127.0.0.1 carries its own Host header.
            response = await raw.post(url, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"})
            assert response.status_code == 421, response.text
            response = await raw.post(
                url, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"}
            )
            assert response.status_code == 403, response.text
            # The right token on a loopback Host is served.
            response = await raw.post(url, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {TOKEN}"})
            assert response.status_code == 200, response.text

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                assert TOOLS <= {t.name for t in (await client.list_tools()).tools}
                result = await client.call_tool("search", {"entity": "kg:Catch_Me_If_You_Can", "direction": "outgoing"})
                assert not result.is_error, result.content
                assert ("directed_by", "Steven Spielberg") in rows_of(result)
                assert result.structured_content["total"] == len(result.structured_content["rows"]) > 0

        with pytest.raises(Exception) as refused:  # the SDK client without a token is turned away too
            async with httpx2.AsyncClient(timeout=10) as http, Client(streamable_http_client(url, http_client=http)) as client:
                await client.list_tools()
        assert "Spielberg" not in repr(refused.value)  # the SDK reports the 401 as an MCPError in a group

        # The drivers' client: it closes the HTTP connections it opened (the SDK leaves a given client open).
        # What the calls above left for the collector is collected first, so that only this client's counts.
        gc.collect()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            async with KGClient.connect(url=url, token=TOKEN) as kg:
                found = await kg.call_tool("find_entities", {"name": "Steven Spielberg"})
            gc.collect()
        assert not found.is_error and [str(w.message) for w in caught if w.category is ResourceWarning] == []
        out, err = finish(process)
    assert TOKEN not in out and TOKEN not in err
    assert TOKEN[:12] not in out + err
    assert out == "", out  # logs, uvicorn's included, go to stderr only


# --- SSE ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, TOKEN], ids=["open", "token"])
async def test_sse_get_relations(metaqa_store_dir, token):
    with http_server(metaqa_store_dir, "sse", token) as (base, process):
        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with Client(sse_client(base + "/sse", headers=headers)) as client:
            result = await client.call_tool("get_relations", {"entity": "kg:Catch_Me_If_You_Can"})
            assert not result.is_error, result.content
            assert "directed_by" in result.content[0].text
            relations = json.dumps(result.structured_content)
            assert "directed_by" in relations and "starred_actors" in relations

        # DNS rebinding on SSE: refused with 421. (The SDK then raises inside its ASGI app, so uvicorn
        # logs a traceback and drops the connection: use a client of its own.)
        async with httpx2.AsyncClient(timeout=10) as raw:
            evil = await raw.get(base + "/sse", headers={"Host": "evil.example", **(headers or {})})
            assert evil.status_code == 421
        async with httpx2.AsyncClient(timeout=10) as raw:
            if token:
                for bad in ({}, {"Authorization": "Bearer " + "y" * len(token)}):
                    refused = await raw.get(base + "/sse", headers=bad)
                    assert refused.status_code == 401
                    posted = await raw.post(base + "/messages/?session_id=0123456789abcdef0123456789abcdef", json=INITIALIZE, headers=bad)
                    assert posted.status_code == 401
        out, err = finish(process)
    if token:
        assert token not in out + err


# --- in memory: resources, prompts, instructions, tool errors ----------------------------------


async def test_in_memory_resources_prompts_instructions_errors(metaqa):
    async with Client(build_server(metaqa)) as client:
        instructions = client.instructions or ""
        assert "search" in instructions and "find_entities" in instructions

        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"kg://schema", "kg://stats"} <= resources
        stats = json.loads((await client.read_resource("kg://stats")).contents[0].text)
        assert stats["triples"] == metaqa.stats().triples > 129_000
        assert stats["relations"] >= 9 and stats["entities"] > 40_000
        schema = json.loads((await client.read_resource("kg://schema")).contents[0].text)
        assert "directed_by" in {r["relation"] for r in schema["top_relations"]}
        assert isinstance(schema["prefixes"], dict)

        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert {"search_on_graph", "explore_and_verify", "ground_answer"} <= set(prompts)
        assert [a.name for a in prompts["search_on_graph"].arguments] == ["question"]
        assert prompts["search_on_graph"].arguments[0].required
        question = "Who directed Catch Me If You Can?"
        filled = await client.get_prompt("search_on_graph", {"question": question})
        text = filled.messages[0].content.text
        assert question in text and "{question}" not in text
        assert "{Answer 1}" in text  # the example's braces stay as written
        grounded = await client.get_prompt("ground_answer", {"question": question, "answer": "Steven Spielberg"})
        assert "Steven Spielberg" in grounded.messages[0].content.text

        error = await client.call_tool("search", {"entity": "kg:Nope_Nothing"})
        assert error.is_error is True
        message = error.content[0].text
        assert "kg:Nope_Nothing" in message and "Hint:" in message and "find_entities" in message
        assert "Traceback" not in message and 'File "' not in message

        bad_direction = await client.call_tool("search", {"entity": "kg:Catch_Me_If_You_Can", "direction": "sideways"})
        assert bad_direction.is_error is True and "Traceback" not in bad_direction.content[0].text
