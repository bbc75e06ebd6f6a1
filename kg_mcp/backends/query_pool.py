"""User queries on a local store, run where a deadline can stop them.

pyoxigraph has no query timeout and a Python thread cannot be stopped, so a runaway query (a
cross join with ORDER BY) would hold a core for minutes after the client gave up. Here each such
query runs in one of a few worker processes that hold the store open read-only. A worker past its
deadline is killed, which frees its CPU at once, and a fresh one is started in the background
while the others keep serving. Results cross the pipe as plain tuples, already cut at the row cap.

Memory is bounded the same way: while a query runs, the server reads the worker's anonymous
resident memory (/proc/PID/statm: resident less file-backed pages, so the store's mapped files do
not count) every 50 ms, and kills a worker past `memory_mb`. Workers have no network at all
(kg_mcp.backends._query_worker.leave_network).
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection

import pyoxigraph as ox

from kg_mcp.backends.base import Rows, Term
from kg_mcp.errors import EndpointError, InvalidInput

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 120.0  # opening a large store read-only can take a while
_MEMORY_CHECK_S = 0.05  # how often a running query's memory is read: a fast query is ~0.5 GB/s
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class StoreSource:
    """How a worker opens the store: a directory opened read-only, or N-Quads of an in-memory store."""

    path: str | None = None
    nquads: bytes | None = None

    def open(self) -> ox.Store:
        if self.path is not None:
            return ox.Store.read_only(self.path)
        store = ox.Store()
        store.load(self.nquads or b"", format=ox.RdfFormat.N_QUADS)
        return store


# --- terms as plain data ---------------------------------------------------------------------------
def plain(term: Term | ox.Triple | None):
    """A term as tuples of strings: what crosses between processes."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return ("i", term.value)
    if isinstance(term, ox.BlankNode):
        return ("b", term.value)
    if isinstance(term, ox.Literal):
        return ("l", term.value, term.datatype.value, term.language)
    return ("t", plain(term.subject), plain(term.predicate), plain(term.object))


def from_plain(data) -> Term | ox.Triple | None:
    if data is None:
        return None
    kind = data[0]
    if kind == "i":
        return ox.NamedNode(data[1])
    if kind == "b":
        return ox.BlankNode(data[1])
    if kind == "l":
        if data[3]:
            return ox.Literal(data[1], language=data[3])
        return ox.Literal(data[1], datatype=ox.NamedNode(data[2]))
    return ox.Triple(from_plain(data[1]), from_plain(data[2]), from_plain(data[3]))


@dataclass(eq=False)
class _Worker:
    process: subprocess.Popen
    conn: Connection
    ready: bool = False
    stopped: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid


class QueryPool:
    """`size` worker processes over one store; `run` answers within a deadline or kills the worker.

    Workers start on first use. Stop them with `close` (they also exit when the server does).
    """

    def __init__(
        self, source: StoreSource, *, size: int = 2, location: str = "the store", memory_mb: int = 1024
    ):
        self.source = source
        self.size = size
        self.location = location
        self.memory_mb = memory_mb  # 0: no limit
        self._isolation_warned = False
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._workers: set[_Worker] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Lock()
        self._started = False
        self._closed = False
        self._start_error: str | None = None
        self._starting = 0  # workers spawned, not ready yet
        self._first_ready = threading.Event()  # a worker is ready, or none could start
        # A pool dropped without close (a backend nobody closed) stops its workers all the same.
        self._stop_all = weakref.finalize(self, _stop_workers, self._workers, self._lock, self._stopping)

    def pids(self) -> set[int]:
        """The worker processes alive now (for tests and logs)."""
        with self._lock:
            return {w.pid for w in self._workers}

    def start(self) -> None:
        """Start the workers in the background, if not started yet."""
        with self._lock:
            if self._started:
                return
            self._started = True
        for _ in range(self.size):
            self._spawn_later()

    def run(self, query: str, row_cap: int, timeout_s: float, graphs: list[str] | None = None) -> Rows:
        """The query's rows cut at `row_cap`, or an EndpointError once `timeout_s` has passed. With
        `graphs`, the query's dataset is those named graphs, whatever its text names (None: the
        store as it answers, its default graph and every named graph)."""
        self.start()
        # Starting the first workers (an interpreter, the store opened) is not the query's time.
        self._first_ready.wait(_START_TIMEOUT_S)
        deadline = time.monotonic() + timeout_s
        worker = self._take(deadline, timeout_s)
        try:
            worker.conn.send((query, row_cap, graphs))
            answered = self._await_answer(worker, deadline)
            status, payload = worker.conn.recv() if answered else (None, None)
        except (EOFError, OSError):  # the worker died under the query (out of memory, killed)
            self._replace(worker)
            raise EndpointError(
                "The query stopped the process running it (it may need more memory than the server has).",
                "Narrow the pattern or add a LIMIT.",
            ) from None
        if answered is None:
            self._replace(worker)
            raise EndpointError(
                f"The query needed more than {self.memory_mb:,} MB of memory and was stopped.",
                "Bind more variables so that fewer rows are joined, and avoid ORDER BY, DISTINCT or GROUP BY "
                "over a large join; a LIMIT alone does not help a sorted query.",
            )
        if not answered:
            self._replace(worker)
            raise EndpointError(
                f"The query did not finish within the {timeout_s:g} s limit and was stopped.",
                "Narrow the pattern (bind more variables), drop ORDER BY, or add a LIMIT.",
            )
        self._idle.put(worker)
        if status == "syntax":
            raise InvalidInput(f"The query does not parse: {payload}", "Fix the SPARQL syntax and try again.")
        if status == "store":
            raise EndpointError(f"The store at {self.location} could not be read: {payload}")
        variables, rows, total, boolean = payload
        return Rows(variables, [[from_plain(v) for v in row] for row in rows], total, boolean)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._stop_all()

    # --- workers ---------------------------------------------------------------------------------
    def _await_answer(self, worker: _Worker, deadline: float) -> bool | None:
        """True when the answer came, False at the deadline, None when the worker passed its memory limit."""
        while True:
            left = deadline - time.monotonic()
            if worker.conn.poll(max(0.0, min(left, _MEMORY_CHECK_S))):
                return True
            if left <= _MEMORY_CHECK_S:
                return False
            if self.memory_mb and _private_memory_mb(worker.pid) > self.memory_mb:
                return None

    def _take(self, deadline: float, timeout_s: float) -> _Worker:
        while True:
            try:
                return self._idle.get(timeout=max(0.0, min(deadline - time.monotonic(), 0.1)))
            except queue.Empty:
                pass
            now = time.monotonic()
            if now >= deadline and (now >= deadline + _START_TIMEOUT_S or not self._only_starting()):
                break
        if self._start_error:
            raise EndpointError(f"The store at {self.location} could not be opened: {self._start_error}")
        raise EndpointError(
            f"Every query process stayed busy for the {timeout_s:g} s limit.",
            "Other long queries are running; try again shortly, with a narrower query.",
        )

    def _only_starting(self) -> bool:
        """No worker is busy with a query, some are still starting: waiting is not the query's time."""
        with self._lock:
            return self._starting > 0 and not self._closed and not any(w.ready for w in self._workers)

    def _replace(self, worker: _Worker) -> None:
        with self._lock:
            self._workers.discard(worker)
        self._stop(worker)
        self._spawn_later()

    def _spawn_later(self) -> None:
        with self._lock:
            self._starting += 1
        threading.Thread(target=self._spawn, name="kg-mcp query worker start", daemon=True).start()

    def _spawn(self) -> None:
        # A fresh interpreter, not multiprocessing: forking would copy a process holding RocksDB and
        # threads, and spawn would re-run the caller's __main__. stdout stays the server's (stdio).
        ours, theirs = socket.socketpair()
        process = subprocess.Popen(
            [sys.executable, "-m", "kg_mcp.backends._query_worker", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        worker = _Worker(process, Connection(ours.detach()))
        with self._lock:
            if self._closed:
                self._starting -= 1
                self._stop(worker)
                return
            self._workers.add(worker)
        try:
            worker.conn.send((self.source.path, self.source.nquads))
            opened = worker.conn.poll(_START_TIMEOUT_S)
            status, detail = worker.conn.recv() if opened else ("failed", "it did not open in time")
        except (EOFError, OSError):
            status, detail = "failed", "the process exited"
        with self._lock:
            self._starting -= 1
        if worker.stopped:  # the pool was closed meanwhile
            return
        if status != "ready":
            log.error("query worker for %s did not start: %s", self.location, detail)
            self._start_error = detail
            self._first_ready.set()
            with self._lock:
                self._workers.discard(worker)
            self._stop(worker)
            return
        if detail and not self._isolation_warned:  # the worker kept its network: say so, once
            self._isolation_warned = True
            log.warning("query workers for %s keep network access (%s); the sparql tool's checks still apply",
                        self.location, detail)
        worker.ready = True
        self._idle.put(worker)
        self._first_ready.set()

    def _stop(self, worker: _Worker) -> None:
        _stop_worker(worker, self._stopping)


def _stop_worker(worker: _Worker, stopping: threading.Lock) -> None:
    with stopping:  # once per worker, though a start and a close may race
        if worker.stopped:
            return
        worker.stopped = True
    worker.process.kill()  # SIGKILL: a query inside pyoxigraph never returns to check a flag
    worker.process.wait()
    worker.conn.close()


def _stop_workers(workers: set[_Worker], lock: threading.Lock, stopping: threading.Lock) -> None:
    """Stop every worker of a pool (its close, or its finalizer: nothing here refers to the pool)."""
    with lock:
        taken = list(workers)
        workers.clear()
    for worker in taken:
        _stop_worker(worker, stopping)


def _private_memory_mb(pid: int) -> float:
    """A process's resident memory less its file-backed pages (mapped store files), in MB; 0 if unknown."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            fields = f.read().split()
        return (int(fields[1]) - int(fields[2])) * _PAGE_BYTES / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0
