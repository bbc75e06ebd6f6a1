"""Worker processes that check user queries, each stopped at a time limit.

rdflib's parser is not thread-safe (ten `sparql` calls at once broke the tool until a restart) and
its worst queries within the token cap take about a second of CPU. A lock would make it safe but
would let one such query hold every other caller, and a thread cannot be stopped. So a server
checks queries here: in a few processes of their own (`python -m kg_mcp.sparql._parse_worker`),
one query at a time each, with no network and a memory limit. They start with the first check,
in the background. A check past `timeout_s` kills its worker, which frees the CPU at once, and a
new one is started in its place. Only plain data
crosses: the query and its policy one way, the written text or the error the other.

A parse costs time per token, so the length of a query bounds what it can cost. Calls that wait
for a worker are served shortest query first, and long queries (past LONG_QUERY_CHARS) hold at
most all workers but one: an ordinary query never waits behind a queue of the longest ones, which
is what a caller trying to hold the checkers would send, only for the one short query in hand.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from kg_mcp.calls import deadline
from kg_mcp.errors import EndpointError, InvalidInput, KGError, QueryRefused
from kg_mcp.sparql.checked import CheckedQuery
from kg_mcp.sparql.policy import QueryPolicy

log = logging.getLogger(__name__)

PARSE_WORKERS = 3
LONG_QUERY_CHARS = 600  # ordinary queries are shorter; the worst 600 characters parse in about 0.5 s
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
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a worker came free, or a place to start one
        self._idle: list[_Worker] = []
        self._waiting: list[tuple[int, int]] = []  # a heap of (query length, arrival) of calls waiting
        self._arrivals = itertools.count()
        self._workers: set[_Worker] = set()
        self._count = 0  # workers running or starting
        self._start_error: str | None = None  # why the last worker could not start
        self._closed = False

    def check(self, query: str, policy: QueryPolicy, *, timeout_s: float | None = None) -> CheckedQuery:
        """`checked_query(query, policy)`, computed in a worker; a KGError as that would raise, or
        when the check passes its time limit (`timeout_s`, else the pool's) or finds no free worker
        within the call's deadline."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        long = len(query) > LONG_QUERY_CHARS
        worker = self._take(len(query), long)
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
        with self._lock:
            self._idle.append(worker)
            self._changed.notify_all()
        if reply[0] == "ok":
            return CheckedQuery(*reply[1])
        _, kind, message, hint = reply
        raise _ERRORS.get(kind, InvalidInput)(message, hint)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._workers)
            self._workers.clear()
            self._idle.clear()
            self._changed.notify_all()
        for worker in workers:
            _stop(worker)

    def pids(self) -> set[int]:
        with self._lock:
            return {w.process.pid for w in self._workers}

    # --- workers ---------------------------------------------------------------------------------
    def _take(self, cost: int, long: bool = False) -> _Worker:
        """An idle worker, once every waiting call with a shorter query has had one (and, for a
        `long` query, while another stays idle for short ones); within the call's deadline (or
        4 x `timeout_s` outside a call). Workers are started, and replaced, in the background."""
        left = deadline.left()
        wait = self.timeout_s * 4 if left is None else left
        end = time.monotonic() + wait
        ticket = (cost, next(self._arrivals))
        with self._lock:
            self._fill()
            heapq.heappush(self._waiting, ticket)
            try:
                while True:
                    if self._closed:
                        raise EndpointError("The server is shutting down.")
                    if self._start_error and not self._workers:
                        problem, self._start_error = self._start_error, None
                        raise EndpointError(f"The server could not start a process to check the query ({problem}).")
                    # A long query leaves one idle worker to the short ones (unless there is only one).
                    kept = 1 if long and self.size > 1 else 0
                    if self._waiting[0] == ticket and len(self._idle) > kept:
                        return self._idle.pop()
                    if not self._changed.wait(max(0.0, end - time.monotonic())):
                        raise EndpointError(
                            f"Every query checker stayed busy for {wait:.0f} s.",
                            "Other queries are being checked; try again shortly.",
                        )
            finally:
                self._waiting.remove(ticket)
                heapq.heapify(self._waiting)
                self._changed.notify_all()  # the next in line may go

    def _fill(self) -> None:
        """Start workers in the background for every free place (called with the lock held)."""
        while self._count < self.size and not self._closed:
            self._count += 1
            threading.Thread(target=self._start_idle, name="kg-mcp query checker start", daemon=True).start()

    def _start_idle(self) -> None:
        try:
            worker = self._start()
        except EndpointError as error:
            with self._lock:
                self._count -= 1
                self._start_error = error.message
                self._changed.notify_all()
            return
        with self._lock:
            if self._closed:
                closed = True
            else:
                closed = False
                self._workers.add(worker)
                self._idle.append(worker)
                self._changed.notify_all()
        if closed:
            _stop(worker)

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
            raise EndpointError("it did not start")
        if ready[1]:
            log.warning("query checkers keep network access (%s)", ready[1])
        return worker

    def _discard(self, worker: _Worker) -> None:
        """Stop a worker (past its time or memory) and start its replacement in the background."""
        with self._lock:
            self._workers.discard(worker)
            self._count -= 1
            self._fill()
            self._changed.notify_all()
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
