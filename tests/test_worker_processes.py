"""Long calls in worker processes (KG_MCP_WORKER_PROCESSES, kg_mcp.tools.processes): the same
answers as in the server's own threads, a traversal that goes on across calls, and a worker that
dies taking only its call with it."""

from __future__ import annotations

import os
import signal

from mcp import Client

from bench.team import LONG, comparable, traverse
from kg_mcp.backends import open_store
from kg_mcp.observability import metrics
from kg_mcp.server import build_server
from kg_mcp.settings import Settings


async def _answers(client: Client) -> tuple:
    steps = [comparable(s) for s in await traverse(client, 0)]
    longs = [(await client.call_tool(tool, arguments)).structured_content for tool, arguments in LONG]
    batch = await client.call_tool("search", {"entities": ["kg:Forrest_Gump", "kg:Tom_Hanks"], "direction": "incoming"})
    bad = await client.call_tool("verify", {"claims": [{"subject": "kg:No_Such_Film_At_All", "relation": "x", "object": "y"}]})
    return steps, longs, batch.structured_content, bad.content[0].text


async def test_worker_processes_answer_as_threads_do(metaqa_store_dir):
    threads = open_store(metaqa_store_dir)
    processes = open_store(metaqa_store_dir, settings=Settings(worker_processes=1))
    try:
        async with Client(build_server(threads)) as client:
            expected = await _answers(client)
        server = build_server(processes, processes.settings)
        assert metrics.WORKER_PROCESSES._value.get() == 1
        async with Client(server) as client:
            got = await _answers(client)
            assert got == expected
            assert got[0][1]["path"][0] == got[0][0]["entity"]  # the tree went to the worker and came back

            workers = _pool_workers()
            assert len(workers) == 1  # the calls ran in another process
            for pid in workers:
                os.kill(pid, signal.SIGKILL)
            died = await client.call_tool(*LONG[1])
            assert died.is_error and "Try the call again" in died.content[0].text
            again = await client.call_tool(*LONG[1])
            assert not again.is_error and again.structured_content == expected[1][1]
    finally:
        threads.close()
        processes.close()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def _pool_workers() -> list[int]:
    """The pool's workers: children of this process's forkserver (itself a child of this process)."""
    pids = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    alive = []
    for pid in pids:
        try:
            alive.append((pid, _parent(pid), open(f"/proc/{pid}/cmdline", "rb").read()))
        except OSError:
            continue
    servers = {pid for pid, parent, cmdline in alive if parent == os.getpid() and b"forkserver" in cmdline}
    return [pid for pid, parent, _ in alive if parent in servers]


async def test_a_cursor_a_worker_issued_reads_on_in_another(metaqa_store_dir):
    """The workers sign cursors with the server's key (a secret is dumped as stars): any of them,
    and the server's own threads, read on a page another issued."""
    processes = open_store(metaqa_store_dir, settings=Settings(worker_processes=2))
    try:
        async with Client(build_server(processes, processes.settings)) as client:
            asked = {"entity": "kg:Drama", "path": ["~has_genre"]}
            seen, cursor = [], None
            for _ in range(3):
                page = await client.call_tool("follow", {**asked, **({"cursor": cursor} if cursor else {})})
                assert not page.is_error, page.content[0].text
                seen += [e["entity"]["id"] for e in page.structured_content["entities"]]
                cursor = page.structured_content["next_cursor"]
            last = page.structured_content
            assert cursor and last["offset"] > 0 and len(seen) == len(set(seen)) == last["offset"] + last["shown"]
    finally:
        processes.close()
