"""Worker processes that check user queries, each stopped at a time limit.

rdflib's parser is not thread-safe (ten `sparql` calls at once broke the tool until a restart) and
its worst queries within the token cap take about a second of CPU. A lock would make it safe but
would let one such query hold every other caller, and a thread cannot be stopped. So a server
checks queries here: in a few processes of their own (`python -m kg_mcp.sparql._parse_worker`),
one query at a time each, with no network and a memory limit. A check past `timeout_s` kills its
worker, which frees the CPU at once; a new one is started when next needed. Only plain data
crosses: the query and its policy one way, the written text or the error the other.
"""

from __future__ import annotations

import logging
import queue
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from kg_mcp import deadline
from kg_mcp.errors import EndpointError, InvalidInput, KGError, QueryRefused
from kg_mcp.sparql.checked import CheckedQuery
from kg_mcp.sparql.policy import QueryPolicy

log = logging.getLogger(__name__)

PARSE_WORKERS = 2
# The worst query within the token cap parses in about a second on a quiet core; real ones in
# 5-50 ms. Past this the check is stopped.
PARSE_TIMEOUT_S = 5.0
PARSE_MEMORY_MB = 512  # address space of a worker (rdflib and the interpreter take under 100 MB)
_START_TIMEOUT_S = 60.0  # an interpreter importing rdflib, on a busy machine
_ERRORS: dict[str, type[KGError]] = {"InvalidInput": InvalidInput, "QueryRefused": QueryRefused}


@dataclass(eq=False)
class _Worker:
    process: subprocess.Popen
    conn: Connection


class ParsePool:
    """At most `size` checking processes, started when first needed; `check` is thread-safe."""

    def __init__(self, size: int = PARSE_WORKERS, *, timeout_s: float = PARSE_TIMEOUT_S, memory_mb: int = PARSE_MEMORY_MB):
        self.size = size
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers: set[_Worker] = set()
        self._count = 0  # workers running or starting
        self._closed = False

    def check(self, query: str, policy: QueryPolicy, *, timeout_s: float | None = None) -> CheckedQuery:
        """`checked_query(query, policy)`, computed in a worker; a KGError as that would raise, or
        when the check passes its time limit (`timeout_s`, else the pool's) or finds no free worker
        within the call's deadline."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        worker = self._take()
        try:
            worker.conn.send((query, policy))
            answered = worker.conn.poll(limit)
            reply = worker.conn.recv() if answered else None
        except (EOFError, OSError):  # the worker died (past its memory limit, killed)
            self._discard(worker)
            raise InvalidInput(
                "Checking the query stopped the process doing it (it needed too much memory).",
                "Write a shorter query: fewer terms and less nesting.",
            ) from None
        if reply is None:
            self._discard(worker)
            raise InvalidInput(
                f"Checking the query took longer than {limit:g} s and was stopped.",
                "Write a shorter query: fewer terms, less nesting, no long chains of operators.",
            )
        self._idle.put(worker)
        if reply[0] == "ok":
            _, text, form, graphs = reply
            return CheckedQuery(text, form, tuple(graphs))
        _, kind, message, hint = reply
        raise _ERRORS.get(kind, InvalidInput)(message, hint)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._workers)
            self._workers.clear()
        for worker in workers:
            _stop(worker)

    def pids(self) -> set[int]:
        with self._lock:
            return {w.process.pid for w in self._workers}

    # --- workers ---------------------------------------------------------------------------------
    def _take(self) -> _Worker:
        """An idle worker, a new one while fewer than `size` run, else the first to come free
        within the call's deadline (or `timeout_s` outside a call)."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._closed:
                raise EndpointError("The server is shutting down.")
            start = self._count < self.size
            self._count += start
        if start:
            try:
                worker = self._start()
            except BaseException:
                with self._lock:
                    self._count -= 1
                raise
            with self._lock:
                self._workers.add(worker)
            return worker
        left = deadline.left()
        wait = self.timeout_s * 4 if left is None else left
        end = time.monotonic() + wait
        try:
            return self._idle.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            raise EndpointError(
                f"Every query checker stayed busy for {wait:.0f} s.",
                "Other queries are being checked; try again shortly.",
            ) from None

    def _start(self) -> _Worker:
        ours, theirs = socket.socketpair()
        process = subprocess.Popen(
            [sys.executable, "-m", "kg_mcp.sparql._parse_worker", str(theirs.fileno()), str(self.memory_mb)],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # stdout is the stdio transport's
        )
        theirs.close()
        worker = _Worker(process, Connection(ours.detach()))
        try:
            ready = worker.conn.poll(_START_TIMEOUT_S) and worker.conn.recv()
        except (EOFError, OSError):
            ready = None
        if not ready or ready[0] != "ready":
            _stop(worker)
            log.error("a query checker did not start: %s", ready)
            raise EndpointError("The server could not start a process to check the query.", "Try again shortly.")
        if ready[1]:
            log.warning("query checkers keep network access (%s)", ready[1])
        return worker

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self._workers.discard(worker)
            self._count -= 1
        _stop(worker)


def _stop(worker: _Worker) -> None:
    worker.process.kill()  # SIGKILL: a parse never returns to check a flag
    worker.process.wait()
    worker.conn.close()


_shared: ParsePool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> ParsePool:
    """The process's one pool, shared by every server and backend in it (workers exit with it)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ParsePool()
        return _shared
