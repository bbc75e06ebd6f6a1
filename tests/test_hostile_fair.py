"""Fair shares between callers (issue 31, items 3 and 4): the lanes that long calls, sparql queries
and endpoint calls wait in, query workers, and kgr_search traversal trees.

The lanes (kg_mcp.tools.lanes) are exercised directly on an event loop, calls held open by events;
then through a real `kg-mcp serve --transport http` subprocess, its clients the SDK's own, bound to
distinct loopback addresses (127.0.0.2, .3 ...) to be distinct callers, against the demo KG, a
local store's query workers and `oxigraph serve` behind a proxy that holds chosen queries. What is
asserted is order (a bystander was answered while the attacker's calls were still held), counts
and texts, never elapsed time.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from fault_proxy import Fault, FaultProxy, kg_mcp_server
from kg_mcp.tools.lanes import Busy, Lane
from kg_mcp.kg_reasoner.traversal import TraversalStore

# --- the lanes, on an event loop -----------------------------------------------------------------


class Calls:
    """Calls into a lane, each held in its place until released; `ran` is the order they got places."""

    def __init__(self, lane: Lane):
        self.lane, self.ran, self.tasks = lane, [], {}
        self.gates: dict[str, asyncio.Event] = {}

    def start(self, name: str, caller: str, wait_s: float | None = None) -> None:
        gate = self.gates[name] = asyncio.Event()

        async def call():
            async with self.lane.place(caller, wait_s):
                self.ran.append(name)
                await gate.wait()

        self.tasks[name] = asyncio.ensure_future(call())

    async def finish(self, name: str) -> None:
        self.gates[name].set()
        await self.tasks[name]
        for _ in range(3):
            await asyncio.sleep(0)  # the next call in turn takes its place


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_callers_take_turns_and_a_callers_own_burst_waits_behind_the_others():
    calls = Calls(Lane("test calls", places=1, share=1))
    for name in ("a1", "a2", "a3", "a4"):
        calls.start(name, "addr:10.0.0.1")
    await _settle()
    calls.start("b1", "addr:10.0.0.2")
    calls.start("c1", "addr:10.0.0.3")
    await _settle()
    assert calls.ran == ["a1"]
    for name in ("a1", "b1", "c1", "a2", "a3"):
        await calls.finish(name)
    assert calls.ran == ["a1", "b1", "c1", "a2", "a3", "a4"]
    await calls.finish("a4")
    assert calls.lane.free == 1 and calls.lane.queued == 0


async def test_one_caller_holds_its_share_and_others_take_the_free_places_at_once():
    calls = Calls(Lane("test calls", places=2, share=1))
    calls.start("a1", "addr:10.0.0.1")
    calls.start("a2", "addr:10.0.0.1")  # a place is free, but a1 is this caller's share
    calls.start("b1", "addr:10.0.0.2")
    await _settle()
    assert calls.ran == ["a1", "b1"]
    await calls.finish("b1")
    assert calls.ran == ["a1", "b1"]  # b's place stays free: a2 waits for a's own share
    await calls.finish("a1")
    assert calls.ran == ["a1", "b1", "a2"]
    await calls.finish("a2")


async def test_the_local_client_may_hold_every_place():
    calls = Calls(Lane("test calls", places=2, share=1))
    calls.start("l1", "local")
    calls.start("l2", "local")
    await _settle()
    assert calls.ran == ["l1", "l2"]
    await calls.finish("l1")
    await calls.finish("l2")


async def test_a_callers_queue_is_bounded_and_the_excess_is_refused_at_once():
    lane = Lane("sparql queries", places=1, share=1, queue_per_caller=2)
    calls = Calls(lane)
    for name in ("a1", "a2", "a3"):
        calls.start(name, "addr:10.0.0.1")
    await _settle()
    with pytest.raises(Busy, match="you already have 1 of the server's sparql queries running and 2 waiting"):
        await lane._take("addr:10.0.0.1", 60)
    calls.start("b1", "addr:10.0.0.2")  # another caller still gets in line
    await _settle()
    for name in ("a1", "b1", "a2", "a3"):
        await calls.finish(name)
    assert calls.ran == ["a1", "b1", "a2", "a3"]


async def test_a_full_queue_refuses_the_newest_call_of_the_caller_waiting_most():
    lane = Lane("long calls", places=1, share=1, queue_per_caller=5, queue_total=3)
    calls = Calls(lane)
    for name in ("a1", "a2", "a3", "a4"):  # one running, three waiting: the queue is full
        calls.start(name, "addr:10.0.0.1")
    await _settle()
    calls.start("b1", "addr:10.0.0.2")  # a's newest waiting call gives its place in the queue to b
    await _settle()
    with pytest.raises(Busy, match="yours had the most waiting"):
        await calls.tasks["a4"]
    with pytest.raises(Busy, match="3 long calls are waiting already"):  # b has 1, a 2: nobody to push out
        await lane._take("addr:10.0.0.2", 60)
    for name in ("a1", "b1", "a2", "a3"):
        await calls.finish(name)
    assert calls.ran == ["a1", "b1", "a2", "a3"]


async def test_a_wait_ends_at_its_deadline_and_a_cancelled_wait_leaves_nothing_behind():
    lane = Lane("long calls", places=1, share=1)
    calls = Calls(lane)
    calls.start("a1", "addr:10.0.0.1")
    await _settle()
    with pytest.raises(Busy, match=r"waited its whole time limit \(0.01 s\)"):
        await lane._take("addr:10.0.0.2", 0.01)
    calls.start("b1", "addr:10.0.0.2")
    await _settle()
    calls.tasks["b1"].cancel()  # the client went away while waiting
    await _settle()
    assert lane.queued == 0 and not lane.waiting
    await calls.finish("a1")
    assert lane.free == 1 and not lane.held


def test_a_callers_many_session_names_evict_only_its_own_trees():
    store = TraversalStore(max_sessions=10, per_caller=4)
    mine = store.tree("addr:10.0.0.2 session:mine", "q", "addr:10.0.0.2")
    for i in range(130):  # cheap calls with fresh session names, from another caller
        store.tree(f"addr:10.0.0.3 session:s{i}", "q", "addr:10.0.0.3")
    assert store.tree("addr:10.0.0.2 session:mine", None, "addr:10.0.0.2") is mine
    assert len(store) == 5  # the other caller keeps its 4 newest
    # Many callers together fill the table: the one holding the most gives up its oldest first.
    for caller in range(3, 8):
        for i in range(2):
            store.tree(f"addr:10.0.0.{caller} session:t{i}", "q", f"addr:10.0.0.{caller}")
    assert len(store) == 10 and store.tree("addr:10.0.0.2 session:mine", None, "addr:10.0.0.2") is mine


# --- through a real server -------------------------------------------------------------------------


@asynccontextmanager
async def _client(url: str, address: str):
    http = httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(local_address=address), timeout=120)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def _text(result) -> str:
    return result.content[0].text


# A count over a four-way cross product of the demo KG: it runs until the query time limit stops it.
ENDLESS = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"


async def test_one_caller_holds_one_query_worker_and_another_callers_query_is_answered():
    """Repro 5: one client's four sessions ran a query each on both workers; another client's ASK
    waited behind them. Now that client runs one at a time, and its excess is refused at once."""
    order: list[str] = []
    env = {"KG_MCP_TIMEOUT_S": "4", "KG_MCP_QUEUED_CALLS_PER_CALLER": "1"}
    with kg_mcp_server("--enable-sparql", env=env) as server:

        async def attack(i: int):
            async with _client(server.url, "127.0.0.2") as client:
                result = await client.call_tool("sparql", {"query": ENDLESS})
                order.append(f"attacker {i}")
                return result

        attackers = [asyncio.ensure_future(attack(i)) for i in range(4)]
        async with _client(server.url, "127.0.0.3") as bystander:
            with anyio.fail_after(60):
                while sum(a.done() for a in attackers) < 2:  # two refused at once: the other two are in
                    await asyncio.sleep(0.05)
            answered = await bystander.call_tool("sparql", {"query": "ASK { ?s ?p ?o }"})
            order.append("bystander")
        results = await asyncio.gather(*attackers)
    assert not answered.is_error and "ASK → true" in _text(answered), _text(answered)
    texts = [_text(r) for r in results]
    refused = [t for t in texts if "Busy" in t]
    stopped = [t for t in texts if "did not finish within the 4 s limit" in t]
    assert len(refused) == 2 and len(stopped) == 2, texts
    assert "the most one client may queue" in refused[0]
    assert order.index("bystander") == 2, order  # after the two refusals, before either query ended


async def test_slow_endpoint_queries_leave_threads_for_another_callers_calls(oxigraph_endpoint):
    """Repro 4: 45 slow `sparql` calls took every worker thread; another client waited. Now one
    caller's queries reach the endpoint one at a time, its excess is refused, and the other
    client's calls are answered while they are still held."""
    release = threading.Event()
    env = {"KG_MCP_QUEUED_CALLS_PER_CALLER": "2", "KG_MCP_CONTACT": "mailto:kg-mcp-tests@example.org"}
    slow = 'SELECT ?s WHERE { ?s ?p "held by the proxy" }'
    with FaultProxy(oxigraph_endpoint) as proxy:
        proxy.add(Fault("hold", release=release, delay_s=90), match="held by the proxy")
        with kg_mcp_server("--sparql", proxy.url, "--profile", "wikidata", "--enable-sparql", env=env) as server:
            async with _client(server.url, "127.0.0.2") as attacker, _client(server.url, "127.0.0.3") as bystander:
                calls = [asyncio.ensure_future(attacker.call_tool("sparql", {"query": slow})) for _ in range(45)]
                with anyio.fail_after(60):
                    while sum(c.done() for c in calls) < 42 or proxy.count("hold") < 1:
                        await asyncio.sleep(0.05)
                try:
                    with anyio.fail_after(60):
                        light = [
                            await bystander.call_tool("get_relations", {"entity": "wd:Q8413"}),
                            await bystander.call_tool("find_entities", {"name": "Constantine the Great", "limit": 3}),
                            await bystander.call_tool("sparql", {"query": "ASK { ?s ?p ?o }"}),
                        ]
                    held_while_served = proxy.count("hold")
                    still_running = sum(not c.done() for c in calls)
                finally:
                    release.set()
                with anyio.fail_after(60):
                    results = await asyncio.gather(*calls)
    assert not any(r.is_error for r in light), [_text(r) for r in light]
    assert held_while_served == 1 and still_running == 3  # one at the endpoint, two waiting their turn
    refused = [r for r in results if r.is_error and "Busy" in _text(r)]
    assert len(refused) == 42 and sum(not r.is_error for r in results) == 3


async def test_kgr_search_trees_belong_to_their_caller():
    """Repro 6: 130 calls with fresh session names evicted another client's traversal. Now a
    caller's names are its own: another caller can neither evict nor reach them."""
    question = {"question": "Where was Vincent van Gogh born?", "session": "mine"}
    with kg_mcp_server() as server:
        async with _client(server.url, "127.0.0.2") as owner, _client(server.url, "127.0.0.3") as other:
            first = await owner.call_tool("kgr_search", {"entity": "wd:Q5582", **question})
            second = await owner.call_tool("kgr_search", {"entity": "wd:Q9883", **question})
            assert not first.is_error and not second.is_error, _text(second)
            for i in range(130):
                flood = await other.call_tool("kgr_search", {"entity": "wd:Q9883", "session": f"fresh-{i}"})
                assert not flood.is_error, _text(flood)
            # The same session name from another caller reaches a tree of its own, an empty one.
            stranger = await other.call_tool("kgr_search", {"backtrack": True, "session": "mine"})
            back = await owner.call_tool("kgr_search", {"backtrack": True, "session": "mine"})
    assert stranger.is_error and "Nothing to backtrack from" in _text(stranger)
    assert not back.is_error, _text(back)
    assert back.structured_content["backtracked_from"]["id"] == "wd:Q9883"
