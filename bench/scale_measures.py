"""Target 7: one machine, Freebase-shaped KGs of growing size (1M, 10M, 100M triples).

Per size: `kg-mcp load`'s own code path (kg_mcp.loading, hub statistics and whatever else it
builds) against pyoxigraph's bare `Store.bulk_load` of the same file, each in a fresh process
(its peak RSS read from wait4); the store's size on disk; then p50/p99 of every tool on random
entities and on hubs, the p50s compared with those at the smallest size.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import Row, bulk_load_code, load_code, percentile, timed_child
from bench.freebase_shape import (
    COUNTRIES,
    NS,
    PROFESSIONS,
    Layout,
    country_id,
    entity_name,
    mid,
    profession_id,
    write_freebase,
)
from kg_mcp.backends import Backend, open_store
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, find_entities, get_relations, search, verify
from kg_mcp.tools.verify import TripleClaim

MEMORY_LIMIT_MB = 24 * 1024  # the machine's memory
# Each tool is called on up to `calls` entities, or for this long, whichever ends first.
SECONDS_PER_TOOL = 60.0


def size_label(triples: int) -> str:
    return f"{triples // 1_000_000}M" if triples % 1_000_000 == 0 else f"{triples // 1000}k"


def scale_survey(
    work: Path, sizes: list[int], calls: int, keep: bool = True, reuse: bool = False
) -> list[Row]:
    """Rows for every size; the smallest size's latencies are the baseline of the larger ones.

    Per size, `kg-mcp load`'s code path runs first and the tools are timed on its store; the bare
    `bulk_load` baseline comes last, so a step cut short still has its store and latencies. With
    `reuse`, only the tools are timed, on the stores an earlier run left in `work`.
    """
    rows: list[Row] = []
    reference: dict[str, float] = {}
    for triples in sorted(sizes):
        label = size_label(triples)
        store_dir, bulk_dir = work / f"freebase-{label}.store", work / f"freebase-{label}.bulk-store"
        if reuse:
            if not store_dir.is_dir():
                raise RuntimeError(
                    f"no store at {store_dir} to reuse: run the scale bench once without --scale-reuse"
                )
            rows += _latency_rows(store_dir, triples, calls, min(sizes), reference)
            continue
        started = time.perf_counter()
        source = write_freebase(work / f"freebase-{label}.nt", triples)
        made = (
            f"made in {time.perf_counter() - started:.0f} s" if time.perf_counter() - started > 1 else "found"
        )
        # The child writes how long the name index took, so the store part and the index are told apart.
        index_note = work / f".freebase-{label}.index-seconds"
        ours_code = load_code(source, store_dir, index_note=index_note)
        # bulk_load is timed, then the compaction that kg-mcp load does after it, in the same child.
        compact_note = work / f".freebase-{label}.compact-seconds"
        bulk_code = bulk_load_code(source, bulk_dir, compact_note)
        runs = {"ours": [_load_once(ours_code, store_dir, index_note)], "bulk": []}
        disk_mb = _disk_mb(store_dir)
        print(f"[scale] {label}: kg-mcp load {runs['ours'][0][0]:.0f} s (name index {runs['ours'][0][2]:.0f} s), "
              f"peak RSS {runs['ours'][0][1]:,.0f} MB, store {disk_mb:,.0f} MB", file=sys.stderr, flush=True)  # fmt: skip
        latency_rows = _latency_rows(store_dir, triples, calls, min(sizes), reference)
        # Loads of a few seconds are repeated, alternating, and the medians kept (a shared machine is
        # noisy); tiny ones are only smoke tests and big ones too long to repeat.
        repeats = 3 if 500_000 <= triples <= 3_000_000 else 1
        # Also kg-mcp load without the name index: much of the index is built while pyoxigraph
        # loads, so its share is the whole load's time against this one's (a third load at 100M).
        plain_code = load_code(source, bulk_dir, name_index=False, index_note=index_note)
        runs["plain"] = []
        for i in range(repeats):
            runs["bulk"].append(_load_once(bulk_code, bulk_dir, compact_note))
            shutil.rmtree(bulk_dir, ignore_errors=True)
            runs["plain"].append(_load_once(plain_code, bulk_dir, index_note))
            shutil.rmtree(bulk_dir, ignore_errors=True)
            if i < repeats - 1:
                runs["ours"].append(_load_once(ours_code, store_dir, index_note))
        load_row, index_row = _load_rows(label, triples, runs)
        load_row.note += (
            f"; store on disk {disk_mb:,.0f} MB; N-Triples {source.stat().st_size / 2**20:,.0f} MB ({made})"
        )
        _progress(load_row)
        _progress(index_row)
        rows += [load_row, index_row, *latency_rows]
        if not keep and triples != max(sizes):
            shutil.rmtree(store_dir, ignore_errors=True)
    return rows


def _latency_rows(
    store_dir: Path, triples: int, calls: int, smallest: int, reference: dict[str, float]
) -> list[Row]:
    """A row per tool and kind of call on the store in `store_dir`, its p50 against `reference`
    (filled in at the smallest size)."""
    # A load leaves gigabytes on their way to disk: reads timed now would queue behind them.
    os.sync()
    rows = []
    for name, p50, p99 in latencies(open_store(store_dir), Settings(), triples, calls):
        base = reference.setdefault(name, p50)
        role = (
            "the reference for larger sizes"
            if triples == smallest
            else f"baseline: p50 at {size_label(smallest)}"
        )
        rows.append(
            Row(
                f"scale {size_label(triples)}: {name} p50",
                p50 * 1e3,
                base * 1e3,
                "ms",
                "<= 1.5",
                f"p99 {p99 * 1e3:.1f} ms; {role}",
            )
        )
        _progress(rows[-1])
    return rows


def _progress(row: Row) -> None:
    """Each row as soon as it is measured (stderr): a 100M step that dies keeps what came before."""
    print(
        f"[scale] {row.measure}: {row.ours:.4g} {row.unit} vs {row.baseline:.4g} ({row.goal}) {row.note}",
        file=sys.stderr,
        flush=True,
    )


def _load_once(code: str, target: Path, note: Path | None = None) -> tuple[float, float, float]:
    """(seconds, peak MB, the seconds the child wrote to `note`: its name index or compaction) of one
    load into an empty `target`, in a fresh process."""
    shutil.rmtree(target, ignore_errors=True)
    if note:
        note.unlink(missing_ok=True)
    seconds, peak_mb = timed_child(code)
    if peak_mb > MEMORY_LIMIT_MB:
        raise RuntimeError(f"a load took {peak_mb:,.0f} MB, past the machine's {MEMORY_LIMIT_MB:,} MB")
    return seconds, peak_mb, float(note.read_text()) if note else 0.0


def _load_rows(
    label: str, triples: int, runs: dict[str, list[tuple[float, float, float]]]
) -> tuple[Row, Row]:
    """The store part of `kg_mcp.loading.load_sources` against `Store.bulk_load` then the same
    compaction (median seconds, highest peak), and the load with the name index against the load
    without (issue 15's goal: at most 30% more)."""
    ours_s, ours_mb, _ = _median_run(runs["ours"])
    base_s, base_mb, compact_s = _median_run(runs["bulk"])
    store_s = _median_run(runs["plain"])[0]  # the store part: the load without the name index
    bare_s = base_s - compact_s
    load = Row(
        f"scale {label}: load (triples/s)",
        triples / store_s,
        triples / base_s,
        "t/s",
        ">= 0.9",
        f"store part {store_s:.0f} s (compaction and hub statistics included, name index not), bulk_load "
        f"{bare_s:.0f} s + compaction {compact_s:.0f} s; against bulk_load alone {bare_s / store_s:.2f}; "
        f"whole kg-mcp load {ours_s:.0f} s = {triples / ours_s:,.0f} t/s; peak RSS ours {ours_mb:,.0f} MB, "
        f"bulk_load {base_mb:,.0f} MB (limit {MEMORY_LIMIT_MB:,} MB)",
    )
    index = Row(
        f"scale {label}: load with the name index (s)",
        ours_s,
        store_s,
        "s",
        "<= 1.3",
        f"kg-mcp load {ours_s:.1f} s against {store_s:.1f} s without the index (name_index=False), "
        f"medians of {len(runs['plain'])}",
    )
    return load, index


def _median_run(runs: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(median seconds, highest peak MB, median noted seconds) over repeated loads."""
    return (
        statistics.median(s for s, _, _ in runs),
        max(mb for _, mb, _ in runs),
        statistics.median(i for _, _, i in runs),
    )


def _disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def latencies(
    backend: Backend, settings: Settings, triples: int, calls: int, skip: frozenset[str] = frozenset()
) -> list[tuple[str, float, float]]:
    """(measure, p50 s, p99 s) of each tool but those in `skip`, on random people and on hubs.

    `backend` holds the Freebase-shaped file of `triples` lines: a local store or an endpoint."""
    if backend.profile.name != "freebase":
        raise RuntimeError(f"profile detected as {backend.profile.name}, not freebase")
    layout = Layout(triples)
    rng = random.Random(5)
    start, end = layout.kind_range(0)  # people: every one has a nationality and a place of birth
    people = [rng.randrange(start, end) for _ in range(calls)]
    ids = [mid(i) for i in people]
    usa = mid(country_id(0))
    shown = search(backend, settings, ids[0], "outgoing").text
    if "<http" in shown or "m.0" not in shown:
        raise RuntimeError(f"ids are not compacted on the Freebase-shaped store:\n{shown[:500]}")
    # Hubs: a country, a profession and a type node, each with millions of in-edges at 100M.
    hubs = [usa, mid(profession_id(0)), f"<{NS}people.person>"]
    hub_names = [COUNTRIES[0], PROFESSIONS[0], "Person"]
    hub_relations = ["~people.person.nationality", "~people.person.profession", "~type.object.type"]
    random_cases: dict[str, Callable[[int], object]] = {
        "search": lambda i: search(backend, settings, ids[i], "outgoing"),
        "get_relations": lambda i: get_relations(backend, settings, ids[i]),
        "explore_kg": lambda i: explore_kg(backend, settings, ids[i], ["people.person.place_of_birth"]),
        "verify": lambda i: verify(
            backend, settings, [TripleClaim(subject=ids[i], relation="people.person.nationality", object=usa)]
        ),
        "find_entities": lambda i: find_entities(backend, settings, entity_name(people[i])),
    }
    hub_cases: dict[str, Callable[[int], object]] = {
        "search": lambda i: search(backend, settings, hubs[i % 3], "incoming"),
        "get_relations": lambda i: get_relations(backend, settings, hubs[i % 3]),
        "explore_kg": lambda i: explore_kg(backend, settings, hubs[i % 3], [hub_relations[i % 3]]),
        "verify": lambda i: verify(
            backend,
            settings,
            [TripleClaim(subject=ids[i], relation="people.person.profession", object=hubs[1])],
        ),
        "find_entities": lambda i: find_entities(backend, settings, hub_names[i % 3]),
    }
    # Names as people type them: a letter dropped (a typo), or the surname alone (shared by thousands
    # of people at 100M: the words tier ranks them).
    typed = [n[:3] + n[4:] if i % 2 else n.split()[-1] for i, n in enumerate(map(entity_name, people))]
    typed_cases: dict[str, Callable[[int], object]] = {
        "find_entities": lambda i: find_entities(backend, settings, typed[i])
    }
    results = []
    for kind, cases in (("random", random_cases), ("hubs", hub_cases), ("typed", typed_cases)):
        for tool, call in cases.items():
            if tool in skip:
                continue
            seconds = _timings(call, calls)
            results.append((f"{tool} ({kind})", percentile(seconds, 0.5), percentile(seconds, 0.99)))
    return results


def _timings(call: Callable[[int], object], calls: int) -> list[float]:
    """Seconds per call over up to `calls` arguments, for at most SECONDS_PER_TOOL (at least 3 calls).

    The first call warms caches and is not counted, unless it took seconds: then it is a sample
    like the others (a scan costs the same warm or cold), which keeps a 100M step within hours.
    """
    started = time.perf_counter()
    call(calls - 1)
    first = time.perf_counter() - started
    seconds: list[float] = [first] if first > 1.0 else []
    deadline = time.monotonic() + SECONDS_PER_TOOL
    for i in range(calls - 1):
        if len(seconds) >= 3 and time.monotonic() > deadline:
            break
        started = time.perf_counter()
        call(i)
        seconds.append(time.perf_counter() - started)
    return seconds
