"""A local store read through a named graph (`kg-mcp load --graph`, served with --graph or
--graph-access) against the same data in its default graph, the baseline, in the same run.

    python -m bench.store_graphs [--kb ../shared/data/metaqa/kb.txt] [--work DIR] [-n 30]

MetaQA's KB is loaded twice, into the default graph and into one named graph, both with hub
statistics for nodes of 1,000 edges or more; then each call runs on both, alternated, and the
medians and their ratio (named graph / default graph) are printed. Hub statistics describe the
default graph only, so a hub read through a named graph is counted instead.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import paired_medians
from kg_mcp.backends import open_store
from kg_mcp.loading import load_sources
from kg_mcp.settings import Settings
from kg_mcp.tools import find_entities, get_relations, search

GRAPH = "http://example.org/graph/metaqa"
CALLS = {
    "find_entities 'Drama'": lambda kg: find_entities(kg, kg.settings, "Drama"),
    "search, a film": lambda kg: search(kg, kg.settings, "kg:Catch_Me_If_You_Can"),
    "get_relations, a hub (Drama, 4,016 in-edges)": lambda kg: get_relations(kg, kg.settings, "kg:Drama"),
    "search incoming, the same hub": lambda kg: search(kg, kg.settings, "kg:Drama", "incoming"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=Path(__file__).parents[1] / ".." / "shared" / "data" / "metaqa" / "kb.txt")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("-n", type=int, default=30)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="kg-mcp-store-graphs-"))
    seconds = {}
    for name, graph in (("default", None), ("named", GRAPH)):
        started = time.perf_counter()
        load_sources([args.kb], work / name, progress=False, hub_threshold=1000, graph=graph)
        seconds[name] = time.perf_counter() - started
    print(f"load: default graph {seconds['default']:.1f} s, named graph {seconds['named']:.1f} s, "
          f"ratio {seconds['named'] / seconds['default']:.2f}")
    default = open_store(work / "default")
    named = open_store(work / "named", settings=Settings(graphs=[GRAPH]))

    def fresh(kg, call):  # each call reads its labels again: none is served from the label cache
        kg._label_caches.clear()
        return call(kg)

    print("| call | default graph | named graph | ratio |\n|---|---|---|---|")
    for label, call in CALLS.items():
        base, ours = paired_medians(lambda _: fresh(default, call), lambda _: fresh(named, call), args.n)
        print(f"| {label} | {base * 1e3:.2f} ms | {ours * 1e3:.2f} ms | {ours / base:.2f} |")
    default.close()
    named.close()


if __name__ == "__main__":
    main()
