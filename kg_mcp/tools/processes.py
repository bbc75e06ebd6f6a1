"""Long calls in worker processes, so that a replica's light calls never wait on them for the
interpreter lock (`KG_MCP_WORKER_PROCESSES`, 0: worker threads as before).

Each worker opens the same store read-only (several processes may) and runs the tool function
there; what crosses the pipe is the arguments and the answer as JSON data (and, for kgr_search,
the traversal tree in its JSON form, kg_mcp.state.trees, both ways). The call's deadline goes
with it: the worker's loops stop at the same moment as they would in the server; so does its
trace, when traces are on (the worker's spans hang under the call's). A worker that
dies (killed, out of memory) takes only its call with it: the pool is made again for the next.
A server that ends, even by SIGKILL, takes its workers with it (kg_mcp.backends.lifeline).
The caller's graph set (kg_mcp.backends.graph_access) goes with the call, and the worker reads
through it.

Only stores opened from a folder are served this way (a worker must be able to open the store
itself); the demo KG, in-memory stores and endpoints keep the threads.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from kg_mcp.calls import deadline
from kg_mcp.backends import graph_access, lifeline
from kg_mcp.errors import KGError
from kg_mcp.observability import metrics, tracing
from kg_mcp.settings import Settings
from kg_mcp.state.trees import decode, encode
from kg_mcp.kg_reasoner.traversal import Tree

log = logging.getLogger(__name__)

_backend = None
_ranker = None


def _tools() -> dict:
    from kg_mcp.tools.follow import follow
    from kg_mcp.tools.relations import explore_kg
    from kg_mcp.tools.search import search
    from kg_mcp.tools.traverse import kgr_search
    from kg_mcp.tools.verify import verify

    return {"search": search, "follow": follow, "explore_kg": explore_kg, "verify": verify, "kgr_search": kgr_search}


def _start(path: str, profile: str, settings_json: str, traces_to: str | None) -> None:
    global _backend, _ranker
    lifeline.forked_worker()  # ends with the server, however it ends
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    if traces_to:
        tracing.configure(traces_to, "kg-mcp-worker")
    from kg_mcp.backends import open_store
    from kg_mcp.kg_reasoner import ranker_from_env

    _backend = open_store(path, profile=profile, settings=Settings.model_validate_json(settings_json))
    _ranker = ranker_from_env()


def _ready() -> bool:
    return _backend is not None


def _run(name: str, args: tuple, seconds: float, tree: dict | None, trace_headers: dict, graphs: frozenset[str] | None = None):
    """('ok', (text, data, limit_chars), tree) or ('error', message, tree): the tree as the call left it."""
    tool = _tools()[name]
    moved = decode(tree) if tree is not None else None
    try:
        with deadline.within(seconds), tracing.continued(trace_headers, f"worker {name}"), graph_access.reading(graphs):
            if moved is not None:
                out = tool(_backend, _backend.settings, moved, _ranker, *args)
            else:
                out = tool(_backend, _backend.settings, *args)
    except KGError as error:
        return "error", str(error), encode(moved) if moved is not None else None
    answer = (out.text, out.data.model_dump(mode="json"), out.limit_chars)
    return "ok", answer, encode(moved) if moved is not None else None


class Dumped:
    """A tool's structured content that already crossed from a worker as JSON data."""

    def __init__(self, data: dict):
        self.data = data

    def model_dump(self, mode: str = "json") -> dict:
        return self.data


class WorkerPool:
    TOOLS = frozenset({"search", "follow", "explore_kg", "verify", "kgr_search"})

    def __init__(self, path: str, profile: str, settings: Settings, size: int):
        # The server's process has read the name index ahead already; its page cache is the workers' too.
        worker_settings = settings.model_copy(update={"warm_name_index": False}).model_dump(mode="json")
        # A secret dumps as stars: the workers sign and read cursors with the server's own key.
        worker_settings["cursor_key"] = settings.cursor_key.get_secret_value()
        self.args = (path, profile, json.dumps(worker_settings), tracing.endpoint())
        self.timeout_s = settings.tool_timeout_s
        self.size = size
        self._lock = threading.Lock()
        self._pool = self._make()

    def _make(self) -> ProcessPoolExecutor:
        # forkserver: a fresh interpreter per worker, not a copy of the server's threads and sockets.
        pool = ProcessPoolExecutor(self.size, mp_context=multiprocessing.get_context("forkserver"),
                                   initializer=_start, initargs=self.args)
        for future in [pool.submit(_ready) for _ in range(self.size)]:
            future.result(timeout=300)  # every worker has the store open before the first call
        metrics.WORKER_PROCESSES.set(self.size)
        return pool

    def run(self, name: str, args: tuple, tree: Tree | None = None):
        """(ToolOutput, the tree as the call left it) of the tool `name` run in a worker; KGError as in the server."""
        from kg_mcp.tools._render import ToolOutput

        left = deadline.left()
        with self._lock:
            pool = self._pool
        try:
            outcome, answer, moved = pool.submit(
                _run, name, args, left if left is not None else self.timeout_s, encode(tree) if tree is not None else None,
                tracing.carrier(), graph_access.current(),
            ).result()
        except BrokenProcessPool:
            metrics.WORKER_RESTARTS.inc()
            with self._lock:
                if self._pool is pool:
                    log.warning("a worker process died: starting the pool again")
                    pool.shutdown(wait=False, cancel_futures=True)
                    self._pool = self._make()
            raise KGError("The worker process running this call died (it is being replaced).",
                          "Try the call again; if it dies again, narrow it.") from None
        if outcome == "error":
            raise KGError(answer)
        text, data, limit_chars = answer
        return ToolOutput(text, Dumped(data), limit_chars), decode(moved) if moved is not None else None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        metrics.WORKER_PROCESSES.set(0)
