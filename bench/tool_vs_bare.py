"""Each scale case's tool timed beside its bare query (bench.scale_cases), call by call, cold and warm.

Cold: before every call the store's files are dropped from the page cache (bench.page_cache), and
the backend forgets the labels and hub records it kept, so that the tool reads from the store what
its bare query reads. What each engine keeps in the process stays, as in a server whose page cache
other files took: RocksDB's block cache and the index blocks of its tables, SQLite's cache of the
name index's pages (each bounded, tens of MB); which is why the tool and the bare query read
different entities. The name index is not read ahead (a server reads it in the background).
Warm: every argument is read once by both first, then the same calls are timed. The two are
alternated (the tool first on even steps), so both see the same machine load.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import percentile
from bench.page_cache import StoreFiles
from bench.scale_cases import Case, cases
from kg_mcp.backends import Backend, open_store
from kg_mcp.backends.oxigraph_store import OxigraphBackend
from kg_mcp.settings import Settings

# Each case's pairs of calls stop after this long (at least MIN_PAIRS), so a 100M step ends.
SECONDS_PER_CASE = 60.0
MIN_PAIRS = 3


@dataclass
class Timed:
    """Seconds of each call of a case's tool and of its bare query, in one cache state: wall-clock,
    and the process's processor time (what the code costs, the waits for the disk and for a core
    left out: robust to a machine others load)."""

    case: Case
    tool: list[float]
    bare: list[float]
    tool_cpu: list[float]
    bare_cpu: list[float]
    resident_mb: float = 0.0  # of the store, in the page cache right after a drop (cold only)

    def p50(self, which: str) -> float:
        return statistics.median(getattr(self, which))

    def p99(self, which: str) -> float:
        return percentile(getattr(self, which), 0.99)


@dataclass
class SizeTimes:
    """One store's cold and warm timings, and its disk's random reads."""

    cold: list[Timed]
    warm: list[Timed]
    disk_reads: list[float]  # seconds of single 4 KiB reads at random places in the store's files
    store_mb: float


def time_store(store_dir: Path, triples: int, calls: int, reads: int = 300) -> SizeTimes:
    """Time every case on the store in `store_dir` (the Freebase-shaped KG of `triples` lines)."""
    settings = Settings(warm_name_index=False)
    backend = open_store(store_dir, settings=settings)

    def fresh() -> None:
        """Nothing the backend read and kept (a bench may reach in: the tools have no use for it)."""
        backend._label_caches.clear()
        backend._hub_records.clear()

    try:
        with StoreFiles(store_dir) as files:
            files.sync()  # only clean pages can be dropped
            disk = files.random_reads(reads)
            # find_entities beside the name index's own reads (a bench may reach in, as above)
            every = cases(backend, settings, triples, calls, backend.store, backend._name_index())
            cold = [_cold(case, calls, files, fresh) for case in every]
            warm = [_warm(case, calls) for case in every]
            return SizeTimes(cold, warm, disk, files.size / 2**20)
    finally:
        backend.close()


def _pairs(case: Case, calls: int, before: Callable[[], None]) -> dict[str, list[float]]:
    """Wall-clock and processor seconds of each call: {"tool", "bare", "tool_cpu", "bare_cpu"}."""
    seconds: dict[str, list[float]] = {"tool": [], "bare": [], "tool_cpu": [], "bare_cpu": []}
    deadline = time.monotonic() + SECONDS_PER_CASE
    for i in range(calls):
        if i >= MIN_PAIRS and time.monotonic() > deadline:
            break
        for call, which in ((case.call, "tool"), (case.bare, "bare"))[:: 1 if i % 2 == 0 else -1]:
            before()
            started, started_cpu = time.perf_counter(), time.process_time()
            call(i)
            seconds[which].append(time.perf_counter() - started)
            seconds[f"{which}_cpu"].append(time.process_time() - started_cpu)
    return seconds


def _cold(case: Case, calls: int, files: StoreFiles, fresh: Callable[[], None]) -> Timed:
    def before() -> None:
        fresh()
        files.drop()

    before()
    resident = files.resident() / 2**20  # what a drop leaves (a page mapped by a process stays)
    return Timed(case, **_pairs(case, calls, before), resident_mb=resident)


def _warm(case: Case, calls: int) -> Timed:
    rows = 0
    for i in range(calls):  # every argument read once, by both
        case.call(i)
        rows += case.bare(i)
    if case.bare_finds and not rows:
        raise RuntimeError(f"{case.name}: the bare query found nothing, so it is no baseline")
    return Timed(case, **_pairs(case, calls, lambda: None))


def latencies(
    backend: Backend, settings: Settings, triples: int, calls: int, skip: frozenset[str] = frozenset()
) -> list[tuple[str, float, float]]:
    """(case, p50 s, p99 s) of each tool but those in `skip`, called alone, warm (the first call of
    each is not counted): for a backend without a store of its own to compare with (an endpoint)."""
    store = backend.store if isinstance(backend, OxigraphBackend) else None
    results = []
    for case in cases(backend, settings, triples, calls, store):
        if case.tool in skip:
            continue
        case.call(calls - 1)
        seconds = []
        deadline = time.monotonic() + SECONDS_PER_CASE
        for i in range(calls - 1):
            if i >= MIN_PAIRS and time.monotonic() > deadline:
                break
            started = time.perf_counter()
            case.call(i)
            seconds.append(time.perf_counter() - started)
        results.append((case.name, percentile(seconds, 0.5), percentile(seconds, 0.99)))
    return results
