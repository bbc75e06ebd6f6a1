"""The team deployment as deploy/ ships it, run for real: nginx started from deploy/nginx/kg-mcp.conf
(only its ports and certificate paths replaced; bench/team_rig.py) ending TLS in front of kg-mcp
replicas with --stateless --redis, all opening one MetaQA store read-only, and Debian's Redis.

The issue's done-when, shortened (bench/team.py runs the 40 s version): three replicas, six clients
of mixed calls (one of them with the pre-2026 handshake), one replica SIGKILLed mid-run; no call
fails, every kgr_search traversal answers as on one process, the survivors answer /healthz,
/readyz and /metrics with per-tool counts.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.team import TRAVERSALS, reference_traversals, run_load, traverse
from bench.team_rig import SHIPPED_NGINX, Team, nginx_prefix, shipped_config_for, tool_counts

LOAD_S, KILL_AT_S = 10.0, 3.0


def test_the_shipped_nginx_config_passes_nginx_t(tmp_path):
    import trustme

    cert = trustme.CA().issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "c.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "k.pem"))
    text = shipped_config_for([9001, 9002], 9443, 9080, tmp_path / "c.pem", tmp_path / "k.pem")
    assert text.count("server 127.0.0.1:") == 2 and "listen 127.0.0.1:9443 ssl;" in text
    check = nginx_prefix(tmp_path / "nginx", text)
    assert check.returncode == 0 and "test is successful" in check.stderr, check.stderr
    broken = nginx_prefix(tmp_path / "broken", text.replace("proxy_buffering off;", "proxy_buffering of;"))
    assert broken.returncode != 0  # nginx -t does read what it is given
    shipped = SHIPPED_NGINX.read_text()
    for directive in ("proxy_buffering off;", "non_idempotent", "proxy_set_header X-Request-ID $request_id;",
                      "client_max_body_size 4m;", "client_header_timeout 10s;", "limit_conn kg_mcp_connections 256;"):
        assert directive in shipped


def test_three_replicas_lose_no_call_when_one_is_killed(metaqa_store_dir, tmp_path):
    expected = asyncio.run(reference_traversals(metaqa_store_dir))
    with Team(metaqa_store_dir, tmp_path / "team", 3) as team:
        async def killer():
            await asyncio.sleep(KILL_AT_S)
            team.kill(1)

        tally = asyncio.run(run_load(team.url, team.ca_file, 6, LOAD_S, killer, legacy=1))
        assert tally.failures == []
        assert tally.calls > 100 and len(tally.traversals) >= 6, tally.calls
        assert {which for which, _ in tally.traversals} == set(range(len(TRAVERSALS)))
        for which, steps in tally.traversals:
            assert steps == expected[which]
            assert steps[1]["path"][0] == steps[0]["entity"]  # the second step hangs under the topic

        lines = team.access_log()
        served_by = {addr for _, _, addrs, _, _ in lines for addr in addrs.split(", ")}
        assert len(served_by) == 3  # nginx spread the calls over every replica
        retried = [line for line in lines if ", " in line[2]]
        assert retried and all(line[1] == "200" for line in retried)  # sent again, answered by another
        assert {line[1] for line in lines} <= {"200", "202"}  # 202: the legacy client's notifications

        for i in (0, 2):
            assert team.get(i, "/healthz")[0] == 200
            status, body = team.get(i, "/readyz")
            assert status == 200 and json.loads(body) == {"ready": True, "checks": {"store": "ok", "redis": "ok"}}
            status, metrics = team.get(i, "/metrics")
            counts = tool_counts(metrics)
            assert status == 200 and counts[("kgr_search", "ok")] > 0 and counts[("find_entities", "ok")] > 0
            assert not any(outcome != "ok" for _, outcome in counts)
            assert re.search(r'^kg_mcp_tool_call_seconds_count\{tool="verify"\} [1-9]', metrics, re.M)
            assert "kg_mcp_open_sessions 0.0" in metrics  # stateless: no session anywhere


def test_a_retry_is_answered_once_and_redis_down_fails_only_kgr_search(metaqa_store_dir, tmp_path):
    with Team(metaqa_store_dir, tmp_path / "team", 1) as team:
        replica = team.replica_url(0, "/mcp")

        async def as_request(request_id: str, tool: str, arguments: dict) -> dict:
            # What nginx sends a replica: the same X-Request-ID on every try of one client request.
            async with httpx2.AsyncClient(headers={"X-Request-ID": request_id}, timeout=60) as http:
                async with Client(streamable_http_client(replica, http_client=http)) as client:
                    result = await client.call_tool(tool, arguments)
                    assert not result.is_error, result.content[0].text
                    return result.structured_content

        async def retries():
            topic, question = TRAVERSALS[0]
            await as_request("r1", "kgr_search", {"entity": topic, "question": question, "session": "s"})
            first = await as_request("r2", "kgr_search", {"backtrack": True, "session": "s"})
            again = await as_request("r2", "kgr_search", {"backtrack": True, "session": "s"})
            after = await as_request("r3", "kgr_search", {"backtrack": True, "session": "s"})
            return first, again, after

        first, again, after = asyncio.run(retries())
        assert again == first  # the retry moved nothing
        assert after["entity"] != first["entity"] and after["backtracked_from"] == first["entity"]

        team.stop_redis()

        async def without_redis():
            async with Client(streamable_http_client(replica)) as client:
                kept = await client.call_tool("kgr_search", {"entity": TRAVERSALS[0][0], "session": "t"})
                light = await client.call_tool("find_entities", {"name": "Tom Hanks"})
                long = await client.call_tool("follow", {"entity": "kg:Tom_Hanks", "path": ["~starred_actors"]})
                fresh = await client.call_tool("kgr_search", {"entity": TRAVERSALS[0][0]})  # no session: nothing kept
                return kept, light, long, fresh

        kept, light, long, fresh = asyncio.run(without_redis())
        assert kept.is_error and f"The shared store (Redis at {team.redis_url}) did not answer" in kept.content[0].text
        assert not light.is_error and not long.is_error and not fresh.is_error
        status, body = team.get(0, "/readyz")
        assert status == 503 and json.loads(body)["checks"]["store"] == "ok"
        assert json.loads(body)["checks"]["redis"].startswith("SharedStateError")
        assert re.search(r'^kg_mcp_shared_state_errors_total\{use="traversal"\} [1-9]', team.get(0, "/metrics")[1], re.M)

        team.start_redis()
        time.sleep(1.2)  # past the pause after a failure before Redis is tried again

        async def back():
            async with Client(streamable_http_client(replica)) as client:
                return await traverse(client, 1)

        steps = asyncio.run(back())
        assert all(steps) and steps[1]["path"][0] == steps[0]["entity"]
        assert team.get(0, "/readyz")[0] == 200


def test_nginx_is_installed_by_make_install_test():
    text = subprocess.run(["make", "-n", "install-test"], capture_output=True, text=True, cwd=SHIPPED_NGINX.parents[2]).stdout
    assert "nginx" in text and "redis-server" in text


def test_a_head_with_a_length_waits_for_its_body_and_a_streams_does_not():
    """A replica killed between a JSON answer's head and its body left nginx a head it had already
    passed on, so the call could not be retried (seen once in a full run of the test above)."""
    from kg_mcp.serving.whole_responses import WholeResponses

    async def answer(headers):
        sent, body_ready = [], asyncio.Event()

        async def send(message):
            sent.append(message["type"])

        async def app(scope, receive, send):
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await body_ready.wait()
            await send({"type": "http.response.body", "body": b"{}"})

        call = asyncio.create_task(WholeResponses(app)({"type": "http"}, None, send))
        await asyncio.sleep(0.01)
        before_body = list(sent)
        body_ready.set()
        await call
        return before_body, sent

    json_head = [(b"content-type", b"application/json"), (b"content-length", b"2")]
    assert asyncio.run(answer(json_head)) == ([], ["http.response.start", "http.response.body"])
    stream_head = [(b"content-type", b"text/event-stream")]
    assert asyncio.run(answer(stream_head)) == (["http.response.start"], ["http.response.start", "http.response.body"])
