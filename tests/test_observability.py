"""What an operator watches on one replica: /healthz, /readyz (here with a Redis that does not
answer), /metrics (Prometheus text) and OpenTelemetry traces sent to a collector (an OTLP/HTTP
receiver run here, decoding the real exporter's protobuf), also from a worker process; and a rate
limit that holds across two replicas sharing Redis."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest
from conftest import wait_for_http
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.common import free_port
from bench.team_rig import _end, start_redis, tool_counts
from kg_mcp.observability import metrics
from kg_mcp.serving.health import MetricsAccess, OpsRoutes, Readiness
from kg_mcp.settings import Settings


@contextmanager
def replica(*args: str, env: dict | None = None):
    """`kg-mcp serve --transport http --stateless` (over the demo KG unless `args` name a store);
    yields its base URL."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "kg_mcp", "serve", "--transport", "http", "--stateless",
                                "--port", str(port), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="200", **(env or {})))  # spans sent at once
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(base + "/healthz", timeout=60)
        yield base
    finally:
        _end(process)


class Collector:
    """An OTLP/HTTP trace receiver on loopback: the spans it was sent, decoded."""

    def __init__(self):
        self.spans: list = []
        spans = self.spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                request = ExportTraceServiceRequest()
                request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


async def _calls(url: str) -> list:
    async with Client(streamable_http_client(url)) as client:
        results = [
            await client.call_tool("search", {"entity": "wd:Q5582"}),
            await client.call_tool("search", {"entity": "wd:Q5582", "direction": "incoming"}),
            await client.call_tool("search", {"entity": "no such thing"}),
        ]
        with pytest.raises(MCPError):  # an unknown tool is a protocol error (-32602), counted all the same
            await client.call_tool("no_such_tool", {})
        return results


def test_health_metrics_and_traces_of_one_replica():
    collector = Collector()
    nothing_there = f"redis://127.0.0.1:{free_port()}/0"
    try:
        with replica("--otlp-endpoint", collector.url, "--redis", nothing_there) as base:
            assert httpx2.get(base + "/healthz").json() == {"status": "alive"}  # alive all the same
            ready = httpx2.get(base + "/readyz")
            checks = ready.json()["checks"]
            assert ready.status_code == 503 and checks["store"] == "ok" and "did not answer" in checks["redis"]
            results = asyncio.run(_calls(base + "/mcp"))
            assert [r.is_error for r in results[:3]] == [False, False, True]
            metrics = httpx2.get(base + "/metrics")
            assert metrics.headers["content-type"].startswith("text/plain")
            text = metrics.text
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (
                    any(s.name == "store query" for s in collector.spans)
                    and sum(s.name == "tools/call search" for s in collector.spans) >= 3):
                time.sleep(0.2)  # spans go out in batches
    finally:
        collector.close()
    counts = tool_counts(text)
    assert counts[("search", "ok")] == 2 and counts[("search", "tool_error")] == 1
    assert sum(v for (tool, _), v in counts.items() if tool == "unknown") == 1  # a made-up name is no label
    assert re.search(r'^kg_mcp_tool_call_seconds_count\{tool="search"\} 3\.0$', text, re.M)
    assert re.search(r'^kg_mcp_http_responses_total\{status="200"\} [1-9]', text, re.M)
    assert "kg_mcp_open_connections" in text and "kg_mcp_long_calls_in_flight 0.0" in text

    calls = [s for s in collector.spans if s.name == "tools/call search"]
    queries = [s for s in collector.spans if s.name == "store query"]
    assert len(calls) == 3 and queries
    under = {bytes(s.trace_id) for s in calls}
    assert any(bytes(q.trace_id) in under and bytes(q.parent_span_id) for q in queries)  # a call's query, under it


async def test_metrics_name_signed_in_callers_only_when_the_operator_asks():
    """The series by caller name their subject: left out of /metrics by default, shown with
    KG_MCP_METRICS_CALLERS (with KG_MCP_METRICS_TOKEN, behind that token: tests/test_oauth.py)."""
    metrics.record_call("search", "ok", 0.01, "sub:zed@example.org")
    for access, shown in ((None, False), (MetricsAccess.from_settings(Settings(metrics_callers=True)), True)):
        app = OpsRoutes(None, Readiness({}), access)
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://127.0.0.1") as http:
            text = (await http.get("/metrics")).text
        assert "kg_mcp_tool_calls_total" in text
        assert ('caller="zed@example.org"' in text) is shown and ("kg_mcp_caller_tool_calls" in text) is shown


def test_a_long_calls_trace_goes_on_in_its_worker_process(metaqa_store_dir):
    collector = Collector()
    try:
        with replica("--store", str(metaqa_store_dir), "--otlp-endpoint", collector.url,
                     env={"KG_MCP_WORKER_PROCESSES": "1"}) as base:
            async def verify():
                async with Client(streamable_http_client(base + "/mcp")) as client:
                    return await client.call_tool("verify", {"claims": [
                        {"subject": "kg:Forrest_Gump", "relation": "starred_actors", "object": "kg:Tom_Hanks"}]})

            assert not asyncio.run(verify()).is_error
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not {"worker verify", "tools/call verify"} <= {
                    s.name for s in collector.spans}:
                time.sleep(0.2)  # each process sends its own spans, in batches
    finally:
        collector.close()
    call = next(s for s in collector.spans if s.name == "tools/call verify")
    worker = next(s for s in collector.spans if s.name == "worker verify")
    assert worker.trace_id == call.trace_id and worker.parent_span_id  # one trace across the two processes


def test_a_rate_limit_holds_across_two_replicas_sharing_redis(tmp_path):
    port = free_port()
    redis_process = start_redis(port, tmp_path / "redis")
    try:
        shared = ("--redis", f"redis://127.0.0.1:{port}/0", "--rate-limit", "6")
        with replica(*shared) as one, replica(*shared) as two:
            statuses = [httpx2.post(base + "/mcp", json={"jsonrpc": "2.0", "id": i, "method": "tools/list"},
                                    headers={"Accept": "application/json, text/event-stream",
                                             "MCP-Protocol-Version": "2025-06-18"}).status_code
                        for i, base in enumerate([one, two] * 5)]
    finally:
        _end(redis_process)
    assert statuses[:6] == [200] * 6 and set(statuses[6:]) == {429}  # 6 a minute between them, not 6 each
