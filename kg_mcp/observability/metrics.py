"""The server's Prometheus metrics, one module-level set per process (prometheus-client's registry).

Names and labels are the operator's interface (docs/team/deploy.md explains each): keep them
stable. Label values are bounded: tools are the registered ones, outcomes a fixed set, HTTP statuses
the few codes a server sends, callers at most MAX_CALLER_LABELS signed-in subjects (the rest count
as "other"; address-keyed callers are never labels, an address is not an identity).

The series by caller name people, so they are kept in a registry of their own (CALLERS), which
/metrics shows only when the operator asks for it (kg_mcp.serving.health.MetricsAccess).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import (
    REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest,
)

disable_created_metrics()  # the *_created series double every line for nothing an operator reads

# Latency buckets from a light call on a local store (a few ms) to the call time limit (30 s).
CALL_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
MAX_CALLER_LABELS = 100

TOOL_CALLS = Counter(
    "kg_mcp_tool_calls", "Tool calls answered, by tool and outcome: ok, tool_error (the model was told how to "
    "fix the call), error (refused before the tool ran, or failed inside the server)", ["tool", "outcome"])
TOOL_SECONDS = Histogram("kg_mcp_tool_call_seconds", "Time to answer a tool call, by tool", ["tool"], buckets=CALL_BUCKETS)
CALLERS = CollectorRegistry()  # the series that name signed-in subjects
CALLER_CALLS = Counter(
    "kg_mcp_caller_tool_calls", "Tool calls by signed-in caller (subject) and outcome", ["caller", "outcome"],
    registry=CALLERS)
CALLER_SECONDS = Histogram(
    "kg_mcp_caller_tool_call_seconds", "Time to answer a tool call, by signed-in caller", ["caller"], buckets=CALL_BUCKETS,
    registry=CALLERS)
LONG_CALLS_RUNNING = Gauge("kg_mcp_long_calls_in_flight", "Long calls (verify, follow, kgr_search, batches) running now")
LONG_CALLS_QUEUED = Gauge("kg_mcp_long_calls_queued", "Long calls waiting for a place")
WORKER_PROCESSES = Gauge("kg_mcp_worker_processes", "Worker processes alive for long calls")
WORKER_RESTARTS = Counter("kg_mcp_worker_restarts", "Worker processes replaced (past a call's time limit, or died)")
ENDPOINT_QUERIES = Counter(
    "kg_mcp_endpoint_queries", "SPARQL queries sent to the endpoint, by outcome (ok, error)", ["outcome"])
ENDPOINT_SECONDS = Histogram("kg_mcp_endpoint_query_seconds", "Time for the endpoint to answer a query", buckets=CALL_BUCKETS)
NAME_INDEX_BUILDS = Counter(
    "kg_mcp_name_index_builds", "Name index builds, by kind (store, endpoint) and outcome (built, failed, "
    "elsewhere: another replica holds the build lock)", ["kind", "outcome"])
NAME_INDEX_BUILD_SECONDS = Histogram(
    "kg_mcp_name_index_build_seconds", "Time to build a name index", ["kind"],
    buckets=(1, 5, 15, 60, 300, 900, 3600, 4 * 3600))
HTTP_RESPONSES = Counter("kg_mcp_http_responses", "HTTP responses sent, by status code", ["status"])
OPEN_CONNECTIONS = Gauge("kg_mcp_open_connections", "HTTP connections open now")
OPEN_SESSIONS = Gauge("kg_mcp_open_sessions", "MCP sessions open now (always 0 with --stateless)")
SHARED_STATE_ERRORS = Counter(
    "kg_mcp_shared_state_errors", "Calls to the shared store (Redis) that failed, by what they were for", ["use"])

_callers: set[str] = set()


def exposition(*, callers: bool = False) -> bytes:
    """Every metric in Prometheus text format; the series by signed-in caller only with `callers`."""
    return generate_latest(REGISTRY) + (generate_latest(CALLERS) if callers else b"")
_callers_lock = threading.Lock()


def caller_label(key: str) -> str | None:
    """The label of a caller key: its subject when signed in (at most MAX_CALLER_LABELS of them, then
    "other"), None for callers known only by address.

    >>> caller_label("sub:alice"), caller_label("addr:203.0.113.7"), caller_label("local")
    ('alice', None, None)
    """
    if not key.startswith("sub:"):
        return None
    subject = key[4:]
    with _callers_lock:
        if subject in _callers:
            return subject
        if len(_callers) < MAX_CALLER_LABELS:
            _callers.add(subject)
            return subject
    return "other"


def record_call(tool: str, outcome: str, seconds: float, caller_key: str | None = None) -> None:
    TOOL_CALLS.labels(tool, outcome).inc()
    TOOL_SECONDS.labels(tool).observe(seconds)
    label = caller_label(caller_key) if caller_key else None
    if label is not None:
        CALLER_CALLS.labels(label, outcome).inc()
        CALLER_SECONDS.labels(label).observe(seconds)


@contextmanager
def endpoint_query() -> Iterator[None]:
    """Count and time one query sent to the endpoint (an error is counted and raised on)."""
    started = time.perf_counter()
    try:
        yield
    except BaseException:
        ENDPOINT_QUERIES.labels("error").inc()
        ENDPOINT_SECONDS.observe(time.perf_counter() - started)
        raise
    ENDPOINT_QUERIES.labels("ok").inc()
    ENDPOINT_SECONDS.observe(time.perf_counter() - started)


@contextmanager
def name_index_build(kind: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    except BaseException:
        NAME_INDEX_BUILDS.labels(kind, "failed").inc()
        raise
    NAME_INDEX_BUILDS.labels(kind, "built").inc()
    NAME_INDEX_BUILD_SECONDS.labels(kind).observe(time.perf_counter() - started)


def watch_long_calls(lane) -> None:
    """Read the long calls running and waiting from this lane (kg_mcp.tools.lanes.Lane) when scraped."""
    if getattr(watch_long_calls, "lane", None) is not lane:
        watch_long_calls.lane = lane
        LONG_CALLS_RUNNING.set_function(lambda: lane.places - lane.free)
        LONG_CALLS_QUEUED.set_function(lambda: lane.queued)
