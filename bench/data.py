"""Synthetic data for the benchmarks, seeded so every run builds the same files."""

from __future__ import annotations

import random
from pathlib import Path

E = "http://bench.kg-mcp.local/e/"
P = "http://bench.kg-mcp.local/p/"
HUB = E + "hub"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
_HUB_PREDICATES = ("country", "located_in", "citizen_of", "member_of", "based_in")


def write_graph(path: Path, triples: int, hub_edges: int, seed: int = 7) -> Path:
    """An N-Triples file of `triples` lines: a hub with `hub_edges` incoming edges over five
    predicates (skewed), a background of random edges among ~triples/5 nodes, and labels."""
    if path.exists():
        return path
    rng = random.Random(seed)
    nodes = max(10, triples // 5)
    with path.open("w") as out:
        out.write(f'<{HUB}> <{LABEL}> "The Hub" .\n')
        written = 1
        for i in range(hub_edges):
            predicate = _HUB_PREDICATES[min(4, int(rng.expovariate(1.2)))]
            out.write(f"<{E}n{i}> <{P}{predicate}> <{HUB}> .\n")
        written += hub_edges
        for i in range(min(nodes, (triples - written) // 4)):
            out.write(f'<{E}n{i}> <{LABEL}> "node {i}" .\n')
            written += 1
        while written < triples:
            s, o = rng.randrange(nodes), rng.randrange(nodes)
            out.write(f"<{E}n{s}> <{P}r{rng.randrange(40)}> <{E}n{o}> .\n")
            written += 1
    return path
