"""The optional per-client rate limit (`serve --rate-limit N`): 429 with Retry-After, per client.

Over real HTTP: `kg-mcp serve` on loopback, clients bound to different loopback addresses
(127.0.0.2, 127.0.0.3...), so the server sees distinct clients without leaving the machine.
The token bucket itself is also checked with a fake clock (no sleeping, no timing).
"""

from __future__ import annotations

import json
import math

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import INITIALIZE
from fault_proxy import kg_mcp_server
from kg_mcp.serving.rate_limit import FREE_REFUSALS, HOLD_S, RateLimit
from kg_mcp.serving.tokens import new_token

TOKEN = "kgmcp-rate-limit-token-0123456789abcdef"
LIMIT = 10
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _from(address: str, **kwargs) -> httpx2.AsyncClient:
    """An HTTP client whose connections come from `address` (a loopback address)."""
    return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(local_address=address), timeout=30, **kwargs)


async def test_rate_limit_answers_429_per_client_over_http():
    env = {"KGTOK": TOKEN}
    with kg_mcp_server("--rate-limit", str(LIMIT), "--auth-token-env", "KGTOK", env=env) as server:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with _from("127.0.0.2") as flood:
            # The bucket holds LIMIT requests: all served (here refused by auth: no token) ...
            for _ in range(LIMIT):
                response = await flood.post(server.url, json=INITIALIZE, headers=HEADERS)
                assert response.status_code == 401
            # ... then 429, before auth runs, with or without the right token, whatever the headers say.
            for headers in ({}, auth, {**auth, "X-Forwarded-For": "127.0.0.9"}):
                refused = await flood.post(server.url, json=INITIALIZE, headers=HEADERS | headers)
                assert refused.status_code == 429, refused.text
                retry_after = int(refused.headers["retry-after"])
                assert 1 <= retry_after <= 60 // LIMIT + 1
                body = refused.json()
                assert body["error"] == "rate_limited" and body["retry_after"] == retry_after
                assert f"{LIMIT} requests a minute per client" in body["message"]

        # Another client, at the same time, is served: a whole MCP session with tool calls.
        http = _from("127.0.0.3", headers=auth)
        async with Client(streamable_http_client(server.url, http_client=http)) as client:
            result = await client.call_tool("find_entities", {"name": "Zundert"})
            assert not result.is_error and "wd:Q9883" in result.content[0].text

        # A third client is refused only once it goes past the limit itself.
        async with _from("127.0.0.4", headers=auth) as other:
            codes = [(await other.post(server.url, json=INITIALIZE, headers=HEADERS)).status_code for _ in range(LIMIT + 1)]
        assert codes == [200] * LIMIT + [429], codes
    out, err = server.output()
    assert out == ""  # logs on stderr only
    assert "answered 429" in err and TOKEN not in err and TOKEN[:12] not in err


async def test_signed_in_callers_behind_one_address_have_their_own_limit_and_sessions(tmp_path):
    """A team behind one address (one NAT), each with a named token: each is a client of its own for
    the rate limit and the session caps, so one who floods or opens sessions moves nobody else."""
    tokens = {name: new_token(name, ["kg:read"]) for name in ("ann", "ben")}
    (tmp_path / "tokens.toml").write_text("\n".join(table for _, table in tokens.values()))
    bearer = {name: {"Authorization": f"Bearer {token}"} for name, (token, _) in tokens.items()}
    args = ("--rate-limit", str(LIMIT), "--max-sessions-per-client", "1", "--tokens", str(tmp_path / "tokens.toml"))
    with kg_mcp_server(*args) as server:
        http = _from("127.0.0.5", headers=bearer["ben"])
        async with Client(streamable_http_client(server.url, http_client=http)) as client:
            async with _from("127.0.0.5", headers=bearer["ann"]) as ann:  # the same address
                # Her session is her first: Ben's (busy or idle) is neither in the way nor ended for it.
                opened = await ann.post(server.url, json=INITIALIZE, headers=HEADERS)
                ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
                codes = [(await ann.post(server.url, json=ping, headers=HEADERS)).status_code for _ in range(LIMIT)]
            result = await client.call_tool("find_entities", {"name": "Zundert"})  # Ben's bucket is his own
            assert not result.is_error and "wd:Q9883" in result.content[0].text
        assert opened.status_code == 200, opened.text
        assert 429 not in codes[: LIMIT - 1] and codes[-1] == 429, codes
        async with _from("127.0.0.5") as anonymous:  # no sign-in: the address's own bucket, untouched by both
            assert (await anonymous.post(server.url, json=INITIALIZE, headers=HEADERS)).status_code == 401


def test_rate_limit_flag_needs_http():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "kg_mcp", "serve", "--rate-limit", "5"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode != 0 and "--rate-limit applies to --transport http or sse" in done.stderr
    assert done.stdout == ""


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _call(limiter: RateLimit, client: str) -> tuple[int, dict[str, str], dict | None]:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await limiter({"type": "http", "client": (client, 5000), "headers": []}, receive, send)
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start.get("headers", [])}
    body = json.loads(sent[1]["body"]) if start["status"] == 429 else None
    return start["status"], headers, body


async def _ok_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def test_token_bucket_refills_at_the_rate():
    clock = FakeClock()
    limiter = RateLimit(_ok_app, per_minute=6, clock=clock)  # one request every 10 s, bursts of 6
    assert [(await _call(limiter, "a"))[0] for _ in range(6)] == [200] * 6
    status, headers, body = await _call(limiter, "a")
    assert status == 429 and headers["retry-after"] == "10" and body["retry_after"] == 10
    assert (await _call(limiter, "b"))[0] == 200  # its own bucket
    clock.now += 9.0
    status, headers, _ = await _call(limiter, "a")
    assert status == 429 and headers["retry-after"] == "1"
    clock.now += 1.0
    assert (await _call(limiter, "a"))[0] == 200
    assert (await _call(limiter, "a"))[0] == 429
    clock.now += 3600  # a long pause refills the bucket, never past the burst
    assert [(await _call(limiter, "a"))[0] for _ in range(7)] == [200] * 6 + [429]


async def test_a_client_refused_again_and_again_waits_about_a_second_for_each_refusal():
    """A client that sends again as soon as it is refused waits for each refusal past the first
    FREE_REFUSALS in a second, not all for the same time: a flood of one client's connections then
    brings about one request a second on each, not in step. Its Retry-After counts from the answer."""
    clock, held = FakeClock(), []

    async def sleep(seconds: float) -> None:
        held.append(seconds)

    limiter = RateLimit(_ok_app, per_minute=6, clock=clock)  # one request every 10 s, bursts of 6
    limiter.sleep = sleep
    assert [(await _call(limiter, "a"))[0] for _ in range(6)] == [200] * 6
    refusals = [await _call(limiter, "a") for _ in range(FREE_REFUSALS + 5)]
    assert all(status == 429 for status, _, _ in refusals) and len(held) == 5  # the free ones left at once
    assert all(0.5 * HOLD_S <= s <= 1.5 * HOLD_S for s in held) and len(set(held)) > 1
    assert refusals[0][1]["retry-after"] == "10"
    assert refusals[-1][1]["retry-after"] == str(max(1, math.ceil(10 - held[-1])))
    assert (await _call(limiter, "b"))[0] == 200 and len(held) == 5  # another client is not held
    clock.now += 10.0  # a client that waits as told is let through, and its next refusal is not held
    assert [(await _call(limiter, "a"))[0] for _ in range(2)] == [200, 429] and len(held) == 5


async def test_buckets_stay_bounded():
    clock = FakeClock()
    limiter = RateLimit(_ok_app, per_minute=60, clock=clock)
    limiter.MAX_CLIENTS = 100
    for i in range(1000):  # many clients, one request each
        assert (await _call(limiter, f"client-{i}"))[0] == 200
        clock.now += 0.01
    assert len(limiter.buckets) <= 100
    # Websocket or lifespan traffic passes untouched.
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])

    await RateLimit(app, 1)({"type": "lifespan"}, None, None)
    assert seen == ["lifespan"]


def test_per_minute_must_be_positive():
    with pytest.raises(ValueError):
        RateLimit(_ok_app, 0)


async def test_ipv6_clients_are_counted_per_64():
    # One host usually holds a whole /64: its addresses share one bucket; another /64 has its own.
    limiter = RateLimit(_ok_app, per_minute=3, clock=FakeClock())
    same_host = ["2001:db8:1:2::1", "2001:db8:1:2:aa::9", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::77"]
    assert [(await _call(limiter, address))[0] for address in same_host] == [200, 200, 200, 429]
    assert (await _call(limiter, "2001:db8:1:3::1"))[0] == 200
    assert (await _call(limiter, "::ffff:203.0.113.7"))[0] == 200  # an IPv4 client seen through IPv6
    assert set(limiter.buckets) == {"addr:2001:db8:1:2::/64", "addr:2001:db8:1:3::/64", "addr:203.0.113.7"}
