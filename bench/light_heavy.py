"""Light calls of one client while 8 others call the heaviest allowed `verify`, on one replica:
long calls in worker threads (KG_MCP_WORKER_PROCESSES=0, before) and in worker processes
(KG_MCP_WORKER_PROCESSES=2, after), both measured in the same run.

    python -m bench.light_heavy --store S [--seconds 20]

Prints the light calls' p50 and p99 alone and during the heavy load, for each mode, with the
heavy calls answered meanwhile and the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

import httpx2

from bench.hostile_calls import _verify_claims
from bench.hostile_rig import LightClient, RawSession, Served, ms


async def measure(store: Path, work: Path, seconds: float, heavy_clients: int, light_calls: int) -> dict:
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=seconds + 120) as http, LightClient(server.url, seconds + 60) as light:
            await light.run(20)  # warm-up
            alone, _ = await light.run(light_calls)
            claims = _verify_claims(10)
            until, done, heavy = time.monotonic() + seconds, asyncio.Event(), []

            async def attacker():
                session = RawSession(http, server.url)
                await session.open()
                while time.monotonic() < until:
                    answer = await session.call("verify", claims)
                    heavy.append(not answer.get("result", {}).get("isError", True))

            probe = asyncio.create_task(light.run(until=done, timeout=seconds + 10))
            await asyncio.gather(*(attacker() for _ in range(heavy_clients)))
            done.set()
            during, failures = await probe
    return {"alone": alone, "during": during, "failures": failures, "heavy": heavy}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.light_heavy", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path(".bench") / "light-heavy")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--heavy-clients", type=int, default=8)
    parser.add_argument("--light-calls", type=int, default=200)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print("mode | light alone p50 / p99 | light during heavy p50 / p99 | light failed | heavy answered (ok) | load avg")
    during = {}
    for mode, workers in (("threads (before)", "0"), ("processes (after)", "2")):
        os.environ["KG_MCP_WORKER_PROCESSES"] = workers
        r = asyncio.run(measure(args.store, args.work, args.seconds, args.heavy_clients, args.light_calls))
        during[mode] = r["during"]
        print(f"{mode} | {ms(r['alone'], 0.5):.1f} / {ms(r['alone'], 0.99):.1f} ms | {ms(r['during'], 0.5):.1f} / "
              f"{ms(r['during'], 0.99):.1f} ms | {r['failures']} of {len(r['during'])} | {len(r['heavy'])} "
              f"({sum(r['heavy'])}) | {os.getloadavg()[0]:.2f}", flush=True)
    before, after = during.values()
    print(f"after / before, light calls during heavy load: p50 {ms(after, 0.5) / ms(before, 0.5):.2f}, "
          f"p99 {ms(after, 0.99) / ms(before, 0.99):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
