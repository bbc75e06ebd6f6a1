"""Remote faults through a real proxy, and stdio hygiene on errors and Ctrl-C.

The remote backend talks to `oxigraph serve` (the real Wikidata sample) through FaultProxy, a
loopback HTTP proxy that delays, holds, drops connections, or answers 500 / 503 / 429 with
Retry-After as scripted. The backend must retry within bounds, honour Retry-After, give a clear
tool error within its timeout, and never hang; a kg-mcp HTTP server in front of a failing
endpoint must go on serving its other clients.

(tests/test_remote.py tests the same code against a scripted peer that answers every request
itself; here the faults hit real traffic to a real endpoint, and a real server.)
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import signal
import subprocess
import sys
import threading
import time

import anyio
import httpx2
import pytest
from conftest import INITIALIZE
from fault_proxy import Fault, FaultProxy, kg_mcp_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from kg_mcp.backends import open_endpoint
from kg_mcp.errors import EndpointError
from kg_mcp.profiles import WIKIDATA
from kg_mcp.settings import Settings
from kg_mcp.tools import get_relations, search

Q42 = "<http://www.wikidata.org/entity/Q42>"  # Douglas Adams: the "failing" client's entity
INJECTED: dict[str, int] = {}  # fault kind -> requests that got it, over this module (printed at the end)


def _tally(proxy: FaultProxy) -> None:
    with proxy.lock:
        for seen in proxy.seen:
            if seen.fault != "pass":
                INJECTED[seen.fault] = INJECTED.get(seen.fault, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def _report_faults():
    yield
    print(f"\nfaults injected in test_faults.py: {INJECTED} (total {sum(INJECTED.values())})")


@pytest.fixture
def proxy(sparql_endpoint):
    with FaultProxy(sparql_endpoint) as proxy:
        yield proxy
        _tally(proxy)


def _backend(url: str, **settings):
    # Prefixes are not sampled at start here: each test counts the requests of the calls it makes.
    return open_endpoint(
        url,
        profile="wikidata",
        settings=Settings(contact="mailto:kg-mcp-tests@example.org", prefix_discovery=False, **settings),
    )


def _educated_at(backend) -> list:
    return search(backend, Settings(), "wd:Q42", "outgoing", ["wdt:P69"]).data.model_dump(mode="json")["rows"]


# --- the backend through the proxy -------------------------------------------------------------

TRANSIENT = {
    "500 twice": (Fault.error(500), 2),
    "503 once": (Fault.error(503), 1),
    "dropped twice": (Fault("drop"), 2),
    "429 with Retry-After: 1": (Fault.error(429, "1"), 1),
    "slow (1 s)": (Fault("delay", delay_s=1.0), 1),
    "held, then 502": (Fault("hold", release=None, delay_s=0.5, then=Fault.error(502)), 1),
}


@pytest.mark.parametrize("name", TRANSIENT)
def test_transient_faults_are_retried_and_answers_are_unchanged(proxy, sparql_endpoint, name):
    fault, times = TRANSIENT[name]
    if fault.kind == "hold":
        fault.release = threading.Event()  # never set: the hold ends after its delay_s
    expected = _educated_at(_backend(sparql_endpoint))
    proxy.add(fault, times=times)
    assert _educated_at(_backend(proxy.url, timeout_s=20, retries=3)) == expected
    assert proxy.injected == times
    assert proxy.count("pass") >= 1  # then it went through


def test_retry_after_is_honoured(proxy):
    proxy.add(Fault.error(429, "2"), times=1)
    backend = _backend(proxy.url, timeout_s=20)
    assert _educated_at(backend)
    first, second = proxy.seen[0], proxy.seen[1]
    assert first.fault == "status" and second.fault == "pass"
    assert second.at - first.at >= 1.9, "retried before the Retry-After delay"  # a lower bound: sleep waits at least


PERSISTENT = {
    "always 500": (Fault.error(500), "HTTP 500"),
    "always dropped": (Fault("drop"), "unreachable"),
    "always 429, Retry-After: 1": (Fault.error(429, "1"), "HTTP 429"),
    "429, Retry-After: 120": (Fault.error(429, "120"), "asked to wait 120 s"),
    "slower than the timeout": (Fault("delay", delay_s=60), "timed out"),
}


@pytest.mark.parametrize("name", PERSISTENT)
def test_persistent_faults_fail_clearly_within_the_timeout(proxy, name):
    fault, says = PERSISTENT[name]
    proxy.add(fault)
    timeout_s, retries = 3, 3
    backend = _backend(proxy.url, timeout_s=timeout_s, retries=retries)
    started = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        get_relations(backend, Settings(), "wd:Q42")
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert proxy.url in message and says in message, message
    assert caught.value.hint, "the model is told what to do"
    assert 1 <= len(proxy.seen) <= retries + 1, [s.fault for s in proxy.seen]  # retries, within bounds
    assert elapsed < timeout_s + 5, f"hung for {elapsed:.1f} s past a {timeout_s} s limit"  # a bound on hanging


def test_prefix_discovery_on_a_failing_endpoint_does_not_stop_the_start(proxy):
    proxy.add(Fault.error(500))
    backend = open_endpoint(proxy.url, profile="wikidata", settings=Settings(timeout_s=2, retries=1))
    # The first failed look gives up discovery: the profile's prefixes only, ids of others in full.
    assert backend.vocab.prefixes == WIKIDATA.prefixes and backend.vocab.sources == {}
    assert 1 <= len(proxy.seen) <= 2


# --- a kg-mcp server in front of a failing endpoint keeps serving its other clients --------------


def _http_client(url: str):
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=60)))


async def _wait_for(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.05)


async def test_failing_endpoint_does_not_stall_other_clients(proxy):
    env = {"KG_MCP_TIMEOUT_S": "8", "KG_MCP_RETRIES": "2", "KG_MCP_CONTACT": "mailto:kg-mcp-tests@example.org"}
    with kg_mcp_server("--sparql", proxy.url, "--profile", "wikidata", env=env) as server:
        release = threading.Event()
        # Phase 1: every query about Q42 is held at the proxy until the other client is done, then 503.
        hold = proxy.add(Fault("hold", release=release, delay_s=60, then=Fault.error(503)), match=Q42)
        async with _http_client(server.url) as a, _http_client(server.url) as b:
            stuck = asyncio.create_task(a.call_tool("get_relations", {"entity": "wd:Q42"}))
            await _wait_for(lambda: proxy.count("hold") >= 1, "client A's query to reach the proxy")
            for _ in range(3):  # client B, through the same server, meanwhile
                for tool, args in [
                    ("search", {"entity": "wd:Q8413", "direction": "outgoing", "properties_to_filter_for": ["wdt:P19"]}),
                    ("get_relations", {"entity": "wd:Q8413"}),
                    ("find_entities", {"name": "Constantine the Great", "limit": 3}),
                ]:
                    result = await b.call_tool(tool, args)
                    assert not result.is_error, result.content[0].text
            assert not stuck.done(), "client A's call ended before the proxy let its query go"
            served_while_stuck = proxy.count("pass")
            release.set()
            with anyio.fail_after(30):  # a bound on hanging
                failed = await stuck
            assert failed.is_error
            text = failed.content[0].text
            assert proxy.url in text and ("503" in text or "timed out" in text), text
            assert "Traceback" not in text
            assert served_while_stuck >= 9

            # Phase 2: the endpoint is slower than the timeout for Q42: A gets a timeout, B goes on.
            hold.times = 0
            proxy.add(Fault("delay", delay_s=60), match=Q42)
            started = time.monotonic()
            slow = asyncio.create_task(a.call_tool("search", {"entity": "wd:Q42"}))
            await _wait_for(lambda: proxy.count("delay") >= 1, "client A's query to reach the proxy")
            result = await b.call_tool("get_relations", {"entity": "wd:Q8413"})
            assert not result.is_error
            with anyio.fail_after(30):
                timed_out = await slow
            assert timed_out.is_error and "timed out" in timed_out.content[0].text, timed_out.content[0].text
            assert time.monotonic() - started < 8 + 10  # the 8 s deadline, plus slack: a bound on hanging

            # The server is not wedged: A itself is served again once its entity is not the slow one.
            again = await a.call_tool("get_relations", {"entity": "wd:Q8413"})
            assert not again.is_error

        # Ctrl-C on the HTTP server: a clean, quiet exit.
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=30) == 0
        out, err = server.output()
        assert out == "" and "Traceback" not in err, (out, err[-2000:])


# --- stdio: nothing but protocol on stdout, on errors and on Ctrl-C ------------------------------



class StdioServer:
    def __init__(self, *args: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kg_mcp", "-v", "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def send(self, message) -> None:
        line = message if isinstance(message, (str, bytes)) else json.dumps(message)
        self.process.stdin.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
        self.process.stdin.flush()

    def answer(self, wanted_id: int, timeout: float = 30) -> dict:
        """Read stdout lines (each must be JSON-RPC) until the answer to `wanted_id`."""
        result: list[dict] = []

        def read():
            while True:
                line = self.process.stdout.readline()
                if not line:
                    return
                message = json.loads(line)
                assert message["jsonrpc"] == "2.0", line
                if message.get("id") == wanted_id:
                    result.append(message)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        assert result, f"no answer to id {wanted_id} within {timeout} s"
        return result[0]


def test_stdio_ctrl_c_exits_cleanly_with_only_protocol_on_stdout():
    server = StdioServer()
    try:
        server.send(INITIALIZE)
        assert server.answer(1)["result"]["serverInfo"]["name"] == "kg-mcp"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {"entity": "wd:Q5582"}}})
        assert not server.answer(2)["result"].get("isError")
        # A tool error and a call that is still running when Ctrl-C comes.
        server.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search", "arguments": {"entity": '"}\x00'}}})
        assert server.answer(3)["result"]["isError"] is True
        server.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "find_entities", "arguments": {"name": "a", "limit": 50}}})
        server.process.send_signal(signal.SIGINT)
        rc = server.process.wait(timeout=30)
        rest = server.process.stdout.read().decode()
        stderr = server.process.stderr.read().decode()
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
    assert rc == 0, stderr[-2000:]
    for line in rest.splitlines():  # whatever came after: JSON-RPC lines only (an answer to id 4, or nothing)
        assert json.loads(line)["jsonrpc"] == "2.0", line
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-2000:]


def test_stdio_ctrl_c_with_a_terminal_as_stdin():
    # Run by hand in a terminal, stdin is a tty, read in its own way; Ctrl-C must end it too.
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "kg_mcp", "serve"], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    os.close(slave)
    try:
        os.write(master, json.dumps(INITIALIZE).encode() + b"\n")
        line = process.stdout.readline()  # the answer: the server reads the terminal
        assert json.loads(line)["id"] == 1
        process.send_signal(signal.SIGINT)
        rc = process.wait(timeout=30)
        rest, stderr = process.stdout.read().decode(), process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    assert rc == 0 and rest == "" and "Traceback" not in stderr, (rc, rest, stderr[-2000:])


def test_stdio_lone_surrogate_is_a_protocol_error():
    # JSON can spell a lone surrogate ("\ud800"); the SDK's parser refuses the message, so it never
    # reaches a tool. The server goes on answering, and stdout stays protocol only.
    server = StdioServer()
    try:
        server.send(INITIALIZE)
        server.answer(1)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.send(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "find_entities", "arguments": {"name": "a\\ud800"}}}')
        server.send(b"\xff\xfe not utf-8 {{{")
        server.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "find_entities", "arguments": {"name": "Zundert"}}})
        answer = server.answer(3)
        assert "wd:Q9883" in answer["result"]["content"][0]["text"]
        server.process.stdin.close()
        assert server.process.wait(timeout=20) == 0
        rest = server.process.stdout.read().decode()
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
    for line in rest.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0", line
