"""Hostile clients against one shared `kg-mcp serve --transport http` (issues 21 and 31), each
attack on a fresh server over the MetaQA store: what it costs the other clients, measured against
the same server's figures before the attack (light calls' latency, RSS, log size) and, for issue
31's, against its bar: a bystander (another caller) served within 2 s p99.

    python -m bench --only hostile [--quick]
    python -m bench.hostile --quick --attacks smuggle,sessions --server-python-path /tmp/before

Issue 21: smuggle (SERVICE hidden behind comment line ends, to a loopback canary), kgr (40 long
kgr_search questions at once), verify (8 clients calling a heavy verify), halfopen (connections
that never finish their headers), sessions (one client opening sessions and never closing them),
memory (a cross-product SPARQL query), small (X-Forwarded-For, Origin, object ids, long names).
Issue 31 (bench/hostile_shares.py, bench/hostile_wire.py): glued (SERVICE:x to a canary through
an endpoint), burst (10 sparql calls at once on fresh servers), endpoint_rss (an endpoint answer
of 15 KB literals), endpoint_threads (45 slow endpoint sparql calls at once), workers (one client's
4 sessions of endless local queries), traversal (130 fresh kgr_search session names), nonreading
(connections that never read their response), addresses (16 addresses x 64 sessions), bodies (4 MB
calls of unknown keys, an 80k-ping batch, 1.3M empty claims), parse (16 clients of a parse-heavy
query), stats (kg://stats read in a loop), literal (an 84 MB literal built in a query worker).
Bounded in time and count, loopback only; every server, worker and socket is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

from bench.common import Row, print_table
from bench.hostile_calls import kgr, memory, smuggle, verify
from bench.hostile_network import halfopen, sessions, small
from bench.hostile_rig import SERVER_PATH_ENV, load
from bench.hostile_shares import burst, endpoint_rss, endpoint_threads, glued, literal, parse, stats, traversal, workers
from bench.hostile_wire import addresses, bodies, nonreading
from bench.store_measures import metaqa_store

SIZES = {
    "quick": {
        "light": 20,
        "attack_s": 20.0,
        "kgr_calls": 40,
        "verify_clients": 8,
        "sockets": 300,
        "sessions": 500,
        "window_s": 30.0,
        "share_s": 15.0,
        "slow_s": 10.0,
        "servers": 2,
        "rss_rows": 5_000,
        "nonreading_per_client": 10,
    },
    "full": {
        "light": 60,
        "attack_s": 60.0,
        "kgr_calls": 40,
        "verify_clients": 8,
        "sockets": 1_500,
        "sessions": 10_000,
        "window_s": 30.0,
        "share_s": 30.0,
        "slow_s": 20.0,
        "servers": 5,
        "rss_rows": 20_000,
        "nonreading_per_client": 10,
    },
}

ATTACKS = {
    "smuggle": smuggle,
    "kgr": kgr,
    "verify": verify,
    "halfopen": halfopen,
    "sessions": sessions,
    "memory": memory,
    "small": small,
    "glued": glued,
    "burst": burst,
    "endpoint_rss": endpoint_rss,
    "endpoint_threads": endpoint_threads,
    "workers": workers,
    "traversal": traversal,
    "nonreading": nonreading,
    "addresses": addresses,
    "bodies": bodies,
    "parse": parse,
    "stats": stats,
    "literal": literal,
}
SYNC = {"halfopen", "nonreading"}  # attacks with blocking sockets, not coroutines


ISSUE_31 = ["glued", "burst", "endpoint_rss", "endpoint_threads", "workers", "traversal", "nonreading", "addresses",
            "bodies", "parse", "stats", "literal"]


def hostile_survey(work: Path, mode: str, attacks: list[str] | None = None) -> list[Row]:
    """Every attack (or those named) on a fresh server each; rows in the bench's table."""
    store, size, rows = metaqa_store(work), SIZES[mode], []
    for name in attacks or list(ATTACKS):
        attack = ATTACKS[name]
        started = time.perf_counter()
        try:
            result = attack(store, work, size) if name in SYNC else asyncio.run(attack(store, work, size))
        except Exception as error:  # noqa: BLE001 - one attack's failure is a row, the others still run
            result = [Row(f"{name}: the attack failed", 1, 1, "", "<= 0", f"{type(error).__name__}: {str(error)[:300]}")]
        rows += result
        print(f"hostile {name}: {time.perf_counter() - started:.0f} s, {load()}", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller attacks (seconds each)")
    parser.add_argument("--attacks", default="", help=f"comma-separated, of: {','.join(ATTACKS)}; or issue31 for "
                        "that issue's")
    parser.add_argument(
        "--server-python-path", help=f"serve the kg_mcp package in this folder (sets {SERVER_PATH_ENV})"
    )
    parser.add_argument(
        "--sessions",
        type=int,
        help="sessions the flood opens (default 500 quick, 10,000 full: the SDK's cap)",
    )
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("KG_MCP_BENCH_DIR", ".bench")))
    args = parser.parse_args()
    if args.server_python_path:
        os.environ[SERVER_PATH_ENV] = str(Path(args.server_python_path).resolve())
    args.work.mkdir(parents=True, exist_ok=True)
    mode = "quick" if args.quick else "full"
    SIZES[mode]["sessions"] = args.sessions or SIZES[mode]["sessions"]
    started, load_at_start = time.perf_counter(), load()
    names = [n for part in args.attacks.split(",") if part for n in (ISSUE_31 if part == "issue31" else [part])]
    rows = hostile_survey(args.work, mode, names)
    print_table(
        rows,
        f"kg-mcp hostile bench, {mode} mode, {time.perf_counter() - started:.0f} s, {os.cpu_count()} cores, {load_at_start} at start",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
