"""find_entities on a store opened cold, with and without the name index read ahead.

    python -m bench.cold_names --work DIR [--sizes 1M,100M] [--calls 200]

Per size, on the scale bench's Freebase-shaped store (`freebase-SIZE.store` in DIR, left by
`python -m bench --only scale`), and per mode (KG_MCP_WARM_NAME_INDEX on, then off): the index
file's pages are dropped from the page cache (posix_fadvise DONTNEED, as after a reboot or a load
that filled the cache with other files), a fresh process opens the store and times `calls` random
exact names at once, then waits until the read-ahead is done (or the same time, when off) and
times `calls` other names. Printed: p50 and p99 of both batches, the seconds waited, and each p50
against the smallest size's warm p50 after the read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from bench.common import triples_count
from bench.scale_measures import size_label

_CHILD = r"""
import json, random, sys, threading, time
from bench.common import percentile
from bench.freebase_shape import Layout, entity_name
from kg_mcp.backends import open_store
from kg_mcp.tools import find_entities

store, triples, calls, wait_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
started = time.perf_counter()
backend = open_store(store)
layout = Layout(triples)
rng = random.Random(29)
first, end = layout.kind_range(0)
names = [entity_name(rng.randrange(first, end)) for _ in range(2 * calls)]

def timed(batch):
    seconds = []
    for name in batch:
        t = time.perf_counter()
        find_entities(backend, backend.settings, name)
        seconds.append(time.perf_counter() - t)
    return percentile(seconds, 0.5) * 1000, percentile(seconds, 0.99) * 1000

cold = timed(names[:calls])
warming = [t for t in threading.enumerate() if t.name == "kg-mcp-warm-names"]
for thread in warming:
    thread.join()
read_s = time.perf_counter() - started
if not warming and wait_s > read_s:
    time.sleep(wait_s - read_s)
after = timed(names[calls:])
print(json.dumps({"cold": cold, "after": after, "waited_s": time.perf_counter() - started, "read_ahead": bool(warming)}))
"""


def drop_from_cache(path: Path) -> None:
    with open(path, "rb") as index:
        os.posix_fadvise(index.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def measure(store: Path, triples: int, calls: int, warm: bool, wait_s: float) -> dict:
    drop_from_cache(store / "kg-mcp-names.sqlite")
    env = dict(os.environ, KG_MCP_WARM_NAME_INDEX="1" if warm else "0")
    done = subprocess.run([sys.executable, "-c", _CHILD, str(store), str(triples), str(calls), str(wait_s)],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--sizes", default="1M,100M")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    reference = None
    for triples in sorted(triples_count(s) for s in args.sizes.split(",")):
        store = args.work / f"freebase-{size_label(triples)}.store"
        on = measure(store, triples, args.calls, True, 0.0)
        off = measure(store, triples, args.calls, False, on["waited_s"])
        reference = reference or on["after"][0]
        for mode, row in (("read ahead", on), ("not read ahead", off)):
            print(f"{size_label(triples)} {mode}: at once p50 {row['cold'][0]:.3f} ms (p99 {row['cold'][1]:.1f}), "
                  f"after {row['waited_s']:.1f} s p50 {row['after'][0]:.3f} ms (p99 {row['after'][1]:.1f}); "
                  f"against the smallest size's read-ahead p50 after: {row['cold'][0] / reference:.2f} at once, "
                  f"{row['after'][0] / reference:.2f} after", flush=True)


if __name__ == "__main__":
    main()
