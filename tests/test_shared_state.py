"""The state that outlives a call (kg_mcp.state), kept in this process or in a real Redis
(Debian's redis-server, started here): one contract for both, then what only sharing brings
(two replicas see one tree, one bucket, one set of places, one lock) and what a Redis that does
not answer does (a clear error where it is needed, this process's own limits elsewhere)."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
import redis

from bench.common import free_port
from bench.team_rig import _end, start_redis
from kg_mcp.serving.rate_limit import RateLimit
from kg_mcp.state import SharedStateError, redis_store
from kg_mcp.state.memory import InProcessState
from kg_mcp.state.redis_store import RedisState
from kg_mcp.state.trees import decode, encode
from kg_mcp.kg_reasoner.traversal import Candidate, Node


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    port = free_port()
    process = start_redis(port, tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{port}/0"
    _end(process)


@pytest.fixture(params=["in-process", "redis"])
def state(request, redis_url):
    made = InProcessState() if request.param == "in-process" else RedisState(redis_url)
    yield made
    made.close()


def _explore(tree, node_id: str, *neighbours: str, parent: str | None = None) -> None:
    tree.add(Node(node_id, node_id.upper(), parent, "rel" if parent else None,
                  [Candidate.kept(n, n.upper(), "rel", 1.0 - i / 10) for i, n in enumerate(neighbours)]))


def test_a_tree_is_kept_between_calls_until_the_question_changes(state):
    with state.checkout("t1", "q", None) as taken:
        _explore(taken.tree, "a", "b", "c")
    with state.checkout("t1", None, None) as taken:
        assert list(taken.tree.nodes) == ["a"] and taken.tree.question == "q"
        assert taken.tree.unexplored("a").id == "b"
        _explore(taken.tree, "b", "d", parent="a")
    with state.checkout("t1", "q", None) as taken:
        assert taken.tree.path("b") == ["a", "b"] and taken.tree.current == "b"
    with state.checkout("t1", "another question", None) as taken:
        assert taken.tree.nodes == {}
    with state.checkout(None, "q", None) as taken:  # no key: nothing kept
        _explore(taken.tree, "x")
    with state.checkout(None, "q", None) as taken:
        assert taken.tree.nodes == {}


def test_a_retried_request_gets_the_answer_already_given(state):
    with state.checkout("t2", "q", "request-1") as taken:
        assert taken.replayed is None
        _explore(taken.tree, "a", "b")
        taken.answer = {"text": "first", "data": {"n": 1}}
    with state.checkout("t2", "q", "request-1") as taken:
        assert taken.replayed == {"text": "first", "data": {"n": 1}}
    with state.checkout("t2", "q", "request-2") as taken:
        assert taken.replayed is None and list(taken.tree.nodes) == ["a"]


def test_places_are_capped_given_back_and_expire(state):
    tokens = [state.take_place("long", "sub:ann", 2, 30) for _ in range(3)]
    assert tokens[0] and tokens[1] and tokens[2] is None
    assert state.take_place("long", "sub:bob", 2, 30)  # another caller has places of its own
    state.give_back_place("long", "sub:ann", tokens[0])
    assert state.take_place("long", "sub:ann", 2, 30)
    assert state.take_place("short", "sub:cy", 1, 0.2) and state.take_place("short", "sub:cy", 1, 0.2) is None
    time.sleep(0.3)  # a holder that never gives its place back loses it at its lease's end
    assert state.take_place("short", "sub:cy", 1, 0.2)


def test_a_lock_has_one_holder(state):
    lease = state.try_lock("name-index:x")
    assert lease is not None and state.try_lock("name-index:x") is None
    lease.release()
    again = state.try_lock("name-index:x")
    assert again is not None
    again.release()


def test_the_rate_bucket_refills_at_its_rate(state):
    async def spend():
        return [await state.rate_take("addr:203.0.113.9", 2) for _ in range(3)]

    allowed, allowed_too, refused = asyncio.run(spend())
    assert allowed is None and allowed_too is None and 29 < refused <= 30


def test_a_tree_survives_its_json_form():
    state = InProcessState()
    with state.checkout("t", "q", None) as taken:
        _explore(taken.tree, "a", "b", "c")
        _explore(taken.tree, "b", "d", parent="a")
        tree = taken.tree
    again = decode(encode(tree))
    assert encode(again) == encode(tree)
    assert again.candidates == tree.candidates == 3 and again.backtrack().offered.id == "c"


# --- what sharing brings ---------------------------------------------------------------------------


def test_two_replicas_share_trees_buckets_places_and_locks(redis_url):
    one, two = RedisState(redis_url), RedisState(redis_url)
    try:
        with one.checkout("shared", "q", None) as taken:
            _explore(taken.tree, "a", "b")
        with two.checkout("shared", "q", None) as taken:
            assert list(taken.tree.nodes) == ["a"]

        async def spend():
            return [await one.rate_take("sub:dee", 2), await two.rate_take("sub:dee", 2), await one.rate_take("sub:dee", 2)]

        assert asyncio.run(spend())[2] is not None  # the third request of 2 a minute, whichever replica takes it
        assert one.take_place("long", "sub:dee", 1, 30) and two.take_place("long", "sub:dee", 1, 30) is None
        lease = one.try_lock("build")
        assert lease is not None and two.try_lock("build") is None
        lease.release()
        secret = two.shared_secret("cursor-key")  # whichever asks first makes it; the other reads it
        assert len(secret) >= 40 and one.shared_secret("cursor-key") == secret != one.shared_secret("other")
        assert InProcessState().shared_secret("cursor-key") == ""  # one process shares nothing
    finally:
        one.close()
        two.close()


def test_a_dead_holders_lock_frees_within_its_lease(redis_url, monkeypatch):
    monkeypatch.setattr(redis_store, "LEASE_S", 0.6)
    dead, alive = RedisState(redis_url), RedisState(redis_url)
    try:
        assert dead.try_lock("tree:busy") is not None
        time.sleep(0.7)  # still renewed while its holder lives
        assert alive.try_lock("tree:busy") is None
        dead.close()  # a killed replica: no release, no renewal
        time.sleep(0.8)
        assert alive.try_lock("tree:busy") is not None
    finally:
        alive.close()


def test_trees_are_bounded_in_number(redis_url, monkeypatch):
    monkeypatch.setattr(redis_store, "MAX_TREES", 3)
    state = RedisState(redis_url)
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    try:
        for i in range(5):
            with state.checkout(f"bounded-{i}", "q", None) as taken:
                _explore(taken.tree, "a")
        assert client.zcard("kgmcp:tree-index") == 3
        assert len(client.keys("kgmcp:tree:*")) == 3
        assert 0 < client.ttl(f"kgmcp:tree:{redis_store.hashed('bounded-4')}") <= redis_store.TREE_TTL_S
        with state.checkout("bounded-0", "q", None) as taken:  # the least recently used went first
            assert taken.tree.nodes == {}
    finally:
        state.close()


def test_trees_whose_owner_records_are_gone_are_dropped_once_and_saving_goes_on(redis_url, monkeypatch):
    """A caller's set can hold trees with no owner record (a Redis that evicts, or a replica from
    before owners were kept): dropping one takes it out of the set it was taken from, so the
    script that stores a tree ends, and the caller's other trees go as its bounds say."""
    monkeypatch.setattr(redis_store, "TREES_PER_CALLER", 3)
    state = RedisState(redis_url)
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    try:
        for i in range(3):
            with state.checkout(f"orphans-{i}", "q", None, caller="alice") as taken:
                _explore(taken.tree, "a")
        client.delete("kgmcp:tree-owner")  # every owner record gone
        with state.checkout("orphans-3", "q", None, caller="alice") as taken:
            _explore(taken.tree, "a")
        mine = f"kgmcp:tree-index:{redis_store.hashed('alice')}"
        assert client.zcard(mine) == 3 and client.exists(f"kgmcp:tree:{redis_store.hashed('orphans-3')}")
        assert not client.exists(f"kgmcp:tree:{redis_store.hashed('orphans-0')}")  # the oldest went
    finally:
        state.close()


def test_one_callers_trees_are_bounded_apart_from_the_others(state, monkeypatch):
    monkeypatch.setattr(redis_store, "TREES_PER_CALLER", 2)
    if isinstance(state, InProcessState):
        state.traversals.per_caller = 2
    with state.checkout("addr:198.51.100.7 session:keep", "q", None, "addr:198.51.100.7") as taken:
        _explore(taken.tree, "b")
    for i in range(3):
        with state.checkout(f"addr:203.0.113.5 session:{i}", "q", None, "addr:203.0.113.5") as taken:
            _explore(taken.tree, "a")
    with state.checkout("addr:203.0.113.5 session:0", "q", None, "addr:203.0.113.5") as taken:
        assert taken.tree.nodes == {}  # its oldest went when it opened a third
    with state.checkout("addr:203.0.113.5 session:2", "q", None, "addr:203.0.113.5") as taken:
        assert list(taken.tree.nodes) == ["a"]
    with state.checkout("addr:198.51.100.7 session:keep", "q", None, "addr:198.51.100.7") as taken:
        assert list(taken.tree.nodes) == ["b"]  # another caller's tree is not its to push out


def _heavy_tree(tree, rng) -> None:
    """Four explored entities of 100 neighbours with random labels (about 25 KB compressed): what
    a caller searching hubs of a large KG keeps."""
    for k in range(4):
        tree.add(Node(f"e{k}", "E", None, None, [
            Candidate.kept(f"http://kg.example/{rng.randbytes(10).hex()}", rng.randbytes(30).hex(), "rel", 0.5)
            for _ in range(100)]))


async def test_trees_are_bounded_in_bytes_within_redis_maxmemory_and_a_light_caller_is_served(tmp_path):
    """A Redis of 4 MB (noeviction, Redis's own default): 20 heavy callers store 120 trees of about
    25 KB, 3 MB in all. The trees keep within half the maxmemory Redis reports (less what it takes
    empty), each caller within a sixteenth of that, Redis stays under its maxmemory, and a light
    caller's traversal goes on through kgr_search. Then other data fills Redis past its maxmemory:
    the light caller's next step still goes, the room made by dropping the heavy callers' oldest
    trees."""
    from mcp import Client

    from kg_mcp.backends import open_demo
    from kg_mcp.server import build_server

    port = free_port()
    process = start_redis(port, tmp_path / "redis")
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    client.config_set("maxmemory", str(4 * 2**20))
    client.config_set("maxmemory-policy", "noeviction")
    state, backend, rng = RedisState(url), open_demo(), random.Random(7)
    question = "where was Vincent van Gogh born"

    async def light_step(client_, entity: str) -> dict:
        result = await client_.call_tool("kgr_search", {"entity": entity, "question": question, "session": "light"})
        assert not result.is_error, result.content
        return result.structured_content

    try:
        budget = state.tree_budget.get()
        assert budget.maxmemory == 4 * 2**20 and 2**20 < budget.total < 2 * 2**20  # half, less what Redis takes empty
        assert budget.per_caller == budget.total // 16
        async with Client(build_server(backend, backend.settings, shared=state)) as light:
            first = await light_step(light, "wd:Q5582")
            for i in range(20):
                caller = f"addr:198.51.100.{i}"
                for j in range(6):
                    with state.checkout(f"{caller} session:{j}", "q", None, caller) as taken:
                        _heavy_tree(taken.tree, rng)
            stored = {key: client.strlen(key) for key in client.scan_iter("kgmcp:tree:*")}
            owners = client.hgetall("kgmcp:tree-owner")
            by_caller: dict[bytes, int] = {}
            for key, size in stored.items():
                by_caller[owners[key]] = by_caller.get(owners[key], 0) + size
            assert 0.8 * budget.total < sum(stored.values()) <= budget.total  # filled, and no further
            assert max(by_caller.values()) <= budget.per_caller
            assert len(by_caller) == 21
            assert client.info("memory")["used_memory"] < 4 * 2**20, {k: v for k, v in client.info("memory").items()
                                                                      if k.startswith(("used_memory", "maxmemory"))}
            second = await light_step(light, first["triples"][0]["object"]["id"])
            assert [t["id"] for t in second["path"]][0] == "wd:Q5582"  # its tree was kept

            junk = 0
            with pytest.raises(redis.exceptions.OutOfMemoryError):  # other data fills Redis
                while True:
                    client.set(f"other-data:{junk}", rng.randbytes(4096))
                    junk += 1
            # and goes on filling it past its maxmemory (here: the maxmemory lowered under what it holds)
            client.config_set("maxmemory", str(client.info("memory")["used_memory"] - 256 * 1024))
            with pytest.raises(redis.exceptions.OutOfMemoryError):
                client.set("other-data:one-more", b"x")
            before = len(list(client.scan_iter("kgmcp:tree:*")))
            third = await light_step(light, second["triples"][0]["object"]["id"])
            assert [t["id"] for t in third["path"]][:2] == [t["id"] for t in second["path"]][:2]
            assert len(list(client.scan_iter("kgmcp:tree:*"))) < before and junk > 0
            memory = client.info("memory")
            assert memory["used_memory"] < memory["maxmemory"]
    finally:
        state.close()
        backend.close()
        _end(process)


def test_a_full_redis_still_gives_the_secret_it_holds(tmp_path):
    """At its memory cap Redis refuses every write, SET NX included, even for a key it holds: a
    replica started then still reads the cursor key the others use (its pages read on anywhere)."""
    port = free_port()
    process = start_redis(port, tmp_path / "redis")
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    client.config_set("maxmemory-policy", "noeviction")
    first = RedisState(url)
    try:
        secret = first.shared_secret("cursor-key")
        client.config_set("maxmemory", str(client.info("memory")["used_memory"] - 64 * 1024))
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.set("other-data", b"x")
        late = RedisState(url)
        try:
            assert len(secret) >= 40 and late.shared_secret("cursor-key") == secret
        finally:
            late.close()
    finally:
        first.close()
        client.close()
        _end(process)


# --- a Redis that does not answer ------------------------------------------------------------------


def test_without_redis_the_trees_fail_clearly_and_the_rate_limit_falls_back():
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    state = RedisState(url)
    try:
        with pytest.raises(SharedStateError) as failure:
            with state.checkout("t", "q", None):
                pass
        assert f"Redis at {url}" in str(failure.value) and "Try again in a moment" in str(failure.value)
        limit = RateLimit(None, 2, shared=state)

        async def spend():
            return [await limit._wait("addr:198.51.100.1") for _ in range(3)]

        assert asyncio.run(spend())[2] is not None  # this replica's own bucket holds meanwhile
        assert state.try_lock("name-index:y") is not None  # a build goes ahead here rather than never
    finally:
        state.close()


def test_a_long_calls_place_is_renewed_while_held_and_a_dead_replicas_comes_back(redis_url, monkeypatch):
    """A long call may run past any fixed lease, yet a replica killed during one must not keep the
    caller's place until that call's time limit (the team would refuse the caller's calls meanwhile)."""
    monkeypatch.setattr(redis_store, "LEASE_S", 0.6)  # renewed every 0.2 s
    holder, other = RedisState(redis_url), RedisState(redis_url)
    try:
        assert holder.take_place("long", "sub:eve", 1, 0.6, renewed=True)
        time.sleep(1.5)  # well past the lease: still held, by renewal
        assert other.take_place("long", "sub:eve", 1, 0.6) is None
        holder.close()  # the holder dies without giving the place back
        time.sleep(1.0)
        assert other.take_place("long", "sub:eve", 1, 0.6) is not None
    finally:
        other.close()


async def test_a_callers_long_calls_are_counted_on_every_replica(redis_url):
    """With Redis, a caller's share of long calls (half of KG_MCP_HEAVY_CALLS) holds over all the
    replicas together: a place it holds on another one is waited for, then refused at the deadline."""
    from mcp import Client

    from kg_mcp.backends import open_demo
    from kg_mcp.server import build_server
    from kg_mcp.settings import Settings

    other_replica, here = RedisState(redis_url), RedisState(redis_url)
    backend = open_demo(settings=Settings(heavy_calls=2, tool_timeout_s=1.0))  # one long call a caller
    claims = {"claims": [{"subject": "wd:Q5582", "relation": "wdt:P31", "object": "wd:Q5"}]}
    try:
        held = other_replica.take_place("long", "local", 1, 30)  # the in-process client is "local"
        async with Client(build_server(backend, backend.settings, shared=here)) as client:
            refused = await client.call_tool("verify", claims)
            assert refused.is_error and "running on this team's servers" in refused.content[0].text
            other_replica.give_back_place("long", "local", held)
            served = await client.call_tool("verify", claims)
            assert not served.is_error, served.content[0].text
        again = other_replica.take_place("long", "local", 1, 30)
        assert again is not None  # the call gave its place back
    finally:
        backend.close()
        other_replica.close()
        here.close()
