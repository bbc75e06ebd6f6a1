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


# A server whose long calls run in worker processes and whose sparql query, a cross join with no
# end in sight, runs in a query worker; it says "busy" once the query worker has the query.
_BUSY_SERVER = """
import asyncio, sys, time
from mcp import Client
from kg_mcp.backends import open_store
from kg_mcp.server import build_server
from kg_mcp.settings import Settings

settings = Settings(worker_processes=1, sparql_tool=True, timeout_s=600, tool_timeout_s=600, query_workers=1)
backend = open_store(sys.argv[1], settings=settings)
RUNAWAY = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f }"

async def main():
    async with Client(build_server(backend, settings)) as client:
        query = asyncio.create_task(client.call_tool("sparql", {"query": RUNAWAY}))
        while backend._pool is None or not backend._pool.pids() or backend._pool._idle.qsize():
            await asyncio.sleep(0.05)
        print("busy", flush=True)
        await query

asyncio.run(main())
"""


def test_a_server_killed_mid_query_leaves_no_process_behind(pathquestion_store_dir, tmp_path):
    """SIGKILL gives the server no chance to stop anything: its long-call workers (children of the
    fork server), the fork server, the query worker in the middle of a query and the query
    checkers must all end by themselves. Counted by the server's process group."""
    import subprocess
    import sys
    import time

    from bench.team_rig import group_processes

    server = subprocess.Popen([sys.executable, "-c", _BUSY_SERVER, str(pathquestion_store_dir)], stdout=subprocess.PIPE,
                              stderr=(tmp_path / "server.log").open("wb"), text=True, process_group=0)
    try:
        assert server.stdout.readline().strip() == "busy", (tmp_path / "server.log").read_text()[-2000:]
        before = group_processes(server.pid)
        commands = " ".join(before.values())
        # the server, the fork server and its worker, the query worker, the query checkers
        assert "forkserver" in commands and "kg_mcp.backends._query_worker" in commands, before
        assert "kg_mcp.sparql._parse_worker" in commands and len(before) >= 5, before
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
        deadline = time.monotonic() + 30
        while group_processes(server.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert group_processes(server.pid) == {}
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for pid in group_processes(server.pid):  # what a failed run left: never past this test
            os.kill(pid, signal.SIGKILL)


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
