"""find_entities at scale with and without degrees in the name index (issue 24, item 4).

    python -m bench.scale_names --work DIR [--sizes 1M,10M] [--calls 200]

Per size, on the scale bench's Freebase-shaped store (`freebase-SIZE.store` in DIR, made with
`kg-mcp load`'s code path when missing): a copy of the store's name index gets each entity's
degree (`kg_mcp.backends.name_degrees`, timed), then find_entities is timed on the same store
with the plain index (the baseline: degrees read from the store per candidate) and with the copy,
in alternating rounds. Printed: p50 of exact names and typed names (a surname alone, or a letter
dropped), the ratio with degrees against without in the same run, and each p50 against the
smallest size's.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.common import percentile, triples_count
from bench.freebase_shape import Layout, entity_name, write_freebase
from bench.scale_measures import size_label
from kg_mcp.backends import open_store
from kg_mcp.backends.name_degrees import add_store_degrees
from kg_mcp.loading import load_sources
from kg_mcp.names import NameIndex, index_path
from kg_mcp.settings import Settings
from kg_mcp.tools import find_entities

ROUNDS = 4  # alternating rounds of each index


def _store(work: Path, triples: int) -> Path:
    label = size_label(triples)
    store = work / f"freebase-{label}.store"
    if not store.is_dir():
        source = write_freebase(work / f"freebase-{label}.nt", triples)
        started = time.perf_counter()
        load_sources([source], store, progress=False)
        print(f"[names] {label}: loaded in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return store


def _names(triples: int, calls: int) -> dict[str, list[str]]:
    layout = Layout(triples)
    rng = random.Random(5)
    start, end = layout.kind_range(0)
    exact = [entity_name(rng.randrange(start, end)) for _ in range(calls)]
    typed = [n[:3] + n[4:] if i % 2 else n.split()[-1] for i, n in enumerate(exact)]
    return {"exact": exact, "typed": typed}


def measure(work: Path, triples: int, calls: int) -> dict:
    store_dir = _store(work, triples)
    plain_file = index_path(store_dir)
    with_degrees = work / f".freebase-{size_label(triples)}.names-with-degrees.sqlite"
    backend = open_store(store_dir)
    if not with_degrees.exists():
        shutil.copyfile(plain_file, with_degrees)
        seconds = add_store_degrees(with_degrees, backend.store, backend.profile, Settings().degree_cap, progress=False)
        (work / f".freebase-{size_label(triples)}.degree-seconds").write_text(f"{seconds}")
    fill_s = float((work / f".freebase-{size_label(triples)}.degree-seconds").read_text())
    indexes = {"without": NameIndex.open(plain_file), "with": NameIndex.open(with_degrees)}
    settings = Settings()
    names = _names(triples, calls)
    seconds: dict[tuple[str, str], list[float]] = {}
    os.sync()
    for round_ in range(ROUNDS):
        for which in ("without", "with") if round_ % 2 == 0 else ("with", "without"):
            backend.use_names(indexes[which])
            for kind, typed in names.items():
                find_entities(backend, settings, typed[0])  # warm
                for name in typed[round_::ROUNDS]:
                    started = time.perf_counter()
                    find_entities(backend, settings, name)
                    seconds.setdefault((which, kind), []).append(time.perf_counter() - started)
    for index in indexes.values():
        index.close()
    backend.use_names(None)
    backend.close()
    return {
        "fill_s": fill_s,
        "index_mb": plain_file.stat().st_size / 2**20,
        "index_degrees_mb": with_degrees.stat().st_size / 2**20,
        "p50": {key: statistics.median(v) * 1e3 for key, v in seconds.items()},
        "p99": {key: percentile(v, 0.99) * 1e3 for key, v in seconds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--sizes", default="1M,10M")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    sizes = sorted(triples_count(s) for s in args.sizes.split(","))
    results = {}
    for triples in sizes:
        results[triples] = measure(args.work, triples, args.calls)
        r = results[triples]
        print(f"[names] {size_label(triples)}: {r}", file=sys.stderr, flush=True)
    base = results[sizes[0]]["p50"]
    print("| size | call | p50 without degrees (p99) | p50 with degrees (p99) | with / without | "
          f"with / without at {size_label(sizes[0])} | without / {size_label(sizes[0])} | with / {size_label(sizes[0])} |")
    print("|---|---|---|---|---|---|---|---|")
    for triples in sizes:
        r = results[triples]
        for kind in ("exact", "typed"):
            a, b = r["p50"][("without", kind)], r["p50"][("with", kind)]
            print(f"| {size_label(triples)} | {kind} | {a:.2f} ({r['p99'][('without', kind)]:.1f}) ms | "
                  f"{b:.2f} ({r['p99'][('with', kind)]:.1f}) ms | {b / a:.2f} | "
                  f"{base[('with', kind)] / base[('without', kind)]:.2f} | {a / base[('without', kind)]:.2f} | "
                  f"{b / base[('with', kind)]:.2f} |")
    print()
    for triples in sizes:
        r = results[triples]
        print(f"{size_label(triples)}: degrees recorded in {r['fill_s']:.1f} s; index {r['index_mb']:,.1f} MB, "
              f"with degrees {r['index_degrees_mb']:,.1f} MB")


if __name__ == "__main__":
    main()
