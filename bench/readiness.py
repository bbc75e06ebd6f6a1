"""How long a replica takes to be ready: from `kg-mcp serve --transport http` started to its first
`/readyz` 200 (the store open, its name indexes found, the worker processes started, Redis
answering), as a load balancer sees it.

    python -m bench.readiness --store S                       3 starts with KG_MCP_WORKER_PROCESSES 0 and 2
    python -m bench.readiness --store S --env-file F --runs 5 with an environment file's settings (deploy/kg-mcp.env)

Each start is a fresh process; the store's files are in the page cache after the first (as on a
machine where replicas restart). The load average is printed with each run: on a busy machine
most of the time is the interpreter starting and importing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from bench.common import free_port
from bench.env_file import systemd_environment


def ready_after(store: Path, env: dict[str, str], timeout_s: float = 300.0) -> tuple[float, float]:
    """Seconds from start to the first answer of /healthz, and to the first 200 of /readyz."""
    port = free_port()
    command = [sys.executable, "-m", "kg_mcp", "serve", "--transport", "http", "--port", str(port), "--store", str(store)]
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    alive = None
    try:
        while time.monotonic() - started < timeout_s:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited ({process.returncode}): {' '.join(command)}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2):
                    return alive or time.monotonic() - started, time.monotonic() - started
            except urllib.error.HTTPError:  # it answers, not ready yet
                alive = alive or time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"not ready within {timeout_s:.0f} s")
    finally:
        process.terminate()
        process.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.readiness", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--env-file", type=Path, help="settings read as systemd reads them (its KG_MCP_STORE is ignored)")
    parser.add_argument("--workers", default="0,2", help="KG_MCP_WORKER_PROCESSES values to compare, e.g. 0,2")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith("KG_MCP_")}
    if args.env_file:
        base |= {k: v for k, v in systemd_environment(args.env_file).items() if k != "KG_MCP_STORE"}
    for workers in args.workers.split(","):
        env = {**base, "KG_MCP_WORKER_PROCESSES": workers}
        times = []
        for run in range(args.runs):
            alive, ready = ready_after(args.store, env)
            times.append(ready)
            print(f"workers {workers}, run {run + 1}: answering after {alive:.1f} s, ready after {ready:.1f} s "
                  f"(load average {os.getloadavg()[0]:.1f})", flush=True)
        print(f"workers {workers}: ready after {statistics.median(times):.1f} s (median of {args.runs})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
