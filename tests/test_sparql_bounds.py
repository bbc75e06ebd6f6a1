"""Bounds on the sparql tool's work (issue 31, items 2 and 3): checking a query, and reading an
endpoint's answer.

- Checks run in worker processes (kg_mcp.sparql.parse_pool): a burst of calls on a fresh
  `kg-mcp serve` leaves every client with correct answers, and a check past its time limit is
  stopped (its worker killed) while the next one runs.
- An endpoint's answer is read as it streams and no further than its byte cap or the rows counted:
  on `oxigraph serve` holding rows with 15 KB literals the sparql tool shows the rows read, flagged
  cut, and the other tools fail in words; a loopback server that streams without end sees the
  connection closed once the cap is passed.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time

import anyio
import httpx2
import pytest
from conftest import _oxigraph_serve
from fault_proxy import kg_mcp_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from kg_mcp.backends import open_endpoint
from kg_mcp.backends.engine_answers import _standard_blank_nodes, read_answer
from kg_mcp.backends.remote import RemoteBackend
from kg_mcp.errors import EndpointError, InvalidInput
from kg_mcp.ids import Vocabulary
from kg_mcp.profiles import GENERIC
from kg_mcp.settings import Settings
from kg_mcp.sparql import QueryPolicy, checked_query
from kg_mcp.sparql.parse_pool import ParsePool
from kg_mcp.tools import search, sparql

DIRECTED = "<http://kg-mcp.local/relation/directed_by>"
SPIELBERG = "<http://kg-mcp.local/entity/Steven_Spielberg>"
BIG = "http://big.test/"
LITERAL_KB = 15


# --- checking ---------------------------------------------------------------------------------------


async def test_a_burst_of_sparql_calls_on_a_fresh_server_leaves_every_client_served(metaqa_store_dir):
    """Issue 31: ten sparql calls at once on a fresh server broke the tool for everyone until a restart."""
    clients = 12

    async def one_client(url: str, i: int, answers: dict[int, list[int]]) -> None:
        # Each client from an address of its own: one caller's burst would wait its turn in the
        # sparql lane, or be refused as busy past its queue (kg_mcp.tools.lanes).
        transport = httpx2.AsyncHTTPTransport(local_address=f"127.0.0.{10 + i}")
        async with (
            httpx2.AsyncClient(timeout=120, transport=transport) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            for _ in range(2):  # the burst, then a call after it
                query = f"SELECT ?m WHERE {{ ?m {DIRECTED} {SPIELBERG} }} LIMIT {i + 1}"
                result = await client.call_tool("sparql", {"query": query})
                assert not result.is_error, result.content[0].text
                answers.setdefault(i, []).append(result.structured_content["total"])

    with kg_mcp_server("--store", str(metaqa_store_dir), "--enable-sparql") as server:
        answers: dict[int, list[int]] = {}
        async with anyio.create_task_group() as group:
            for i in range(clients):
                group.start_soon(one_client, server.url, i, answers)
    assert answers == {i: [i + 1, i + 1] for i in range(clients)}


def test_checks_in_this_process_are_safe_from_many_threads():
    results: dict[int, str] = {}

    def check(i: int) -> None:
        results[i] = checked_query(f"SELECT ?s WHERE {{ ?s ?p {i} FILTER(?s != <http://x/{i}>) }}", QueryPolicy()).text

    threads = [threading.Thread(target=check, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: f"SELECT ?s WHERE {{ ?s ?p {i} . FILTER ( ( ?s != <http://x/{i}> ) ) }}" for i in range(16)}


def test_a_check_past_its_time_limit_is_stopped_and_the_next_one_runs():
    pool = ParsePool(size=1)
    try:
        assert pool.check("ASK { ?s ?p ?o }", QueryPolicy()).form == "AskQuery"
        (first,) = pool.pids()
        heavy = "SELECT * WHERE { " + "{ } " * 480 + "}"  # about a second of rdflib's CPU
        with pytest.raises(InvalidInput, match="took longer than 0.05 s and was stopped"):
            pool.check(heavy, QueryPolicy(), timeout_s=0.05)
        assert first not in pool.pids()  # its worker was killed
        assert pool.check("ASK { ?s ?p ?o }", QueryPolicy()).form == "AskQuery"  # by its replacement
        assert len(pool.pids()) == 1
    finally:
        pool.close()


def test_short_queries_are_checked_first_and_keep_a_worker():
    """Two workers and three long queries: one runs, two wait, one worker stays idle; a short query
    is checked by that worker, ahead of the long ones that wait."""
    pool = ParsePool(size=2, timeout_s=120)  # long checks finish however busy the machine is
    heavy = "SELECT * WHERE { " + "{ } " * 480 + "}"
    order: list[str] = []

    def check(name: str, query: str) -> None:
        pool.check(query, QueryPolicy())
        order.append(name)

    try:
        pool.check("ASK { ?s ?p ?o }", QueryPolicy())
        while len(pool.pids()) < 2:  # both workers started (in the background)
            time.sleep(0.05)
        longs = [threading.Thread(target=check, args=(f"long{i}", heavy)) for i in range(3)]
        for thread in longs:
            thread.start()
        time.sleep(0.1)  # one long query runs, the others wait: one worker stays idle
        check("short", "ASK { ?s ?p ?o }")
        for thread in longs:
            thread.join()
    finally:
        pool.close()
    # Long queries run one at a time here: the short one was done before the two that waited.
    assert order.index("short") <= 1 and sorted(order) == ["long0", "long1", "long2", "short"]


# --- reading answers --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_literals(tmp_path_factory) -> str:
    """`oxigraph serve` holding 300 rows with 15 KB literals (4.5 MB as SPARQL JSON) beside small ones."""
    folder = tmp_path_factory.mktemp("big-literals")
    source = folder / "big.nt"
    text = "x" * (LITERAL_KB * 1024)
    with source.open("w", encoding="utf-8") as f:
        for i in range(300):
            f.write(f'<{BIG}hub> <{BIG}note> "{i} {text}" .\n')
        for i in range(5):
            f.write(f'<{BIG}small{i}> <{BIG}name> "small {i}" .\n')
    yield from _oxigraph_serve(folder / "store", source)


def test_an_answer_past_the_byte_cap_is_cut_and_says_so(big_literals):
    settings = Settings(sparql_tool=True, sparql_answer_mb=1, endpoint_answer_mb=1)
    backend = open_endpoint(big_literals, settings=settings)
    try:
        out = sparql(backend, settings, "SELECT ?s ?o WHERE { ?s ?p ?o }")
        assert out.data.cut and "passed 1 MB" in out.data.cut
        assert out.data.total is None and out.data.truncated and out.data.next_cursor is None
        read = int(re.search(r"passed 1 MB after (\d+) rows", out.data.cut).group(1))
        assert 20 < read < 80  # about 1 MB of 15 KB rows
        # the page shows those of them that fit its budget, and says so
        shown = len(out.data.rows)
        assert 0 < shown < read and f"showing the first {shown};" in out.text
        assert out.text.startswith(f"sparql: CUT answer: the endpoint's answer passed 1 MB after {read} rows")
        # with room for them, every row read before the cut is kept (the row cap is 200)
        roomy = Settings(sparql_tool=True, sparql_answer_mb=1, endpoint_answer_mb=1, max_output_chars=200_000)
        assert len(sparql(backend, roomy, "SELECT ?s ?o WHERE { ?s ?p ?o }").data.rows) == read
        # Below the cap the same endpoint's answers are whole and counted.
        small = sparql(backend, settings, f"SELECT ?s WHERE {{ ?s <{BIG}name> ?o }}")
        assert small.data.total == 5 and small.data.cut is None
        # The other tools' queries are bounded too: past the cap the call fails and says so.
        with pytest.raises(EndpointError, match="passed 1 MB, the most kg-mcp reads of one answer"):
            search(backend, settings, f"<{BIG}hub>", "outgoing", [f"<{BIG}note>"])
    finally:
        backend.close()


class Endless:
    """A loopback endpoint that streams SPARQL JSON rows until its client goes away; it records how
    many bytes it wrote before the connection was closed."""

    def __init__(self, row: bytes):
        self.written = 0
        self.closed_by_client = threading.Event()
        endless = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/sparql-results+json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    self._chunk(b'{"head":{"vars":["s"]},"results":{"bindings":[' + row)
                    for _ in range(2_000_000):
                        self._chunk(b"," + row)
                except (BrokenPipeError, ConnectionResetError):
                    endless.closed_by_client.set()

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                endless.written += len(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/sparql"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("row_kb", [0, 15])
def test_reading_stops_and_the_connection_closes(row_kb):
    """Small rows: reading stops at the rows counted (10,000 for a cap of 10); 15 KB rows: at the byte
    cap. Either way the endpoint sees its client go long before the answer would end."""
    value = "v" * (row_kb * 1024) if row_kb else "v"
    endless = Endless(json.dumps({"s": {"type": "literal", "value": value}}).encode())
    settings = Settings(sparql_tool=True, sparql_answer_mb=2, retries=0, timeout_s=20)
    backend = RemoteBackend(endless.url, GENERIC, Vocabulary(GENERIC), settings)
    try:
        rows = backend.run_query("SELECT ?s WHERE { ?s ?p ?o }", 10)
        assert len(rows.rows) == 10 and rows.total is None
        if row_kb:
            assert rows.cut and "passed 2 MB" in rows.cut
        else:
            assert rows.cut is None  # stopped at the rows counted, not cut
        assert endless.closed_by_client.wait(10)
        # The cap, and what the kernel's socket buffers took in (a few MB on loopback): not 30 GB.
        assert endless.written < 32 * 2**20
    finally:
        backend.close()
        endless.close()


def test_virtuoso_blank_nodes_are_made_standard_across_chunk_boundaries():
    body = (
        b'{"head": {"vars": ["x", "l"]}, "results": {"bindings": [{"x": { "type": "bnode", "value": "nodeID://b10001" },'
        b'"l":{"type":"literal","value":"nodeID:// in a sentence"}}]}}'
    )
    for cut in range(1, len(body)):
        answer = read_answer(iter([body[:cut], body[cut:]]), max_bytes=2**20)
        (row,) = answer.result
        assert row["x"].value == "b10001" and row["l"].value == "nodeID:// in a sentence"
    assert b"".join(_standard_blank_nodes(iter([body]))).count(b"nodeID://") == 1
