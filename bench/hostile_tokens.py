"""Forged opaque tokens against a server that introspects (issue 41, the third round of attacks): a
signed-in bystander's latency while one address floods the MCP endpoint with made-up tokens, against
its latency on the same server just before.

    python -m bench.hostile_tokens [--rounds 3] [--seconds 10] [--connections 128] [--rate-limit 60] [--bystanders 8]
    KG_MCP_BENCH_SERVER_PATH=/tmp/before python -m bench.hostile_tokens   # the kg_mcp package found there

It starts a real OpenID provider (npm oidc-provider, tests/js/oidc_provider.mjs, on loopback) and
`kg-mcp serve --transport http` over the MetaQA store with `--oauth-issuer`, `--oauth-client-id` (so
opaque tokens are introspected) and `--rate-limit`. The bystanders (`--bystanders` callers, each
signed in with client credentials of its own, a JWT) call `get_relations` from 127.0.0.1 through the
MCP SDK's client, each once a second (within its rate limit), for `--seconds` idle and then
`--seconds` while a flooder process opens `--connections` keep-alive connections from 127.0.0.2 and
sends, on each, one initialize after another, each with a fresh random opaque token (the flood
starts with the bystanders' run, so its first burst is measured too); `--rounds` times in turn, so
that idle and flooded see alike the machine's other load (it is shared). Printed: the
bystanders' p50 and p99 idle and under the flood, their ratio (the bar: p99 under the flood at most
2x idle), what the flood was answered (by status), and how many introspections the issuer was sent.
Everything runs on loopback and is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import REPO, free_port, percentile, stop, wait_http
from bench.hostile_rig import SERVER_PATH_ENV, _cpu_s
from bench.store_measures import metaqa_store

SECRET = "bench-client-secret-" + "x" * 20
SERVER_SECRET = "bench-kg-mcp-introspects-" + "y" * 20
CALL = ("get_relations", {"entity": "kg:Catch_Me_If_You_Can"})
PACE_S = 1.0  # a bystander's pause between calls, idle and under the flood alike (within a rate limit of 60)
NODE_MODULES = REPO / ".npm-tools" / "node_modules"


class OpenIdProvider:
    """tests/js/oidc_provider.mjs on a free loopback port: the server's own client (to introspect)
    and the bystanders' (JWTs by client credentials)."""

    def __init__(self, work: Path, resource: str, bystanders: int):
        node = shutil.which("node")
        if node is None or not (NODE_MODULES / "oidc-provider").is_dir():
            raise SystemExit("Node.js and npm's oidc-provider are needed: run `make install-test`")
        script = NODE_MODULES.parent / f".oidc_provider.{os.getpid()}.mjs"  # where node finds the package
        shutil.copy(REPO / "tests" / "js" / "oidc_provider.mjs", script)
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        clients = [
            {"client_id": name, "client_secret": SERVER_SECRET if name == "kg-mcp" else SECRET,
             "grant_types": ["client_credentials"], "redirect_uris": [], "response_types": [], "scope": "kg:read"}
            for name in ("kg-mcp", *(f"bystander-{i}" for i in range(bystanders)))
        ]
        config = {"port": self.port, "clients": clients, "users": {}, "resources": {resource: {"scope": "kg:read", "ttl": 3600}}}
        path = work / "oidc.json"
        path.write_text(json.dumps(config))
        self.script = script
        self.process = subprocess.Popen([node, str(script), str(path.resolve())], cwd=NODE_MODULES.parent,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("ready"):
            self.close()
            raise RuntimeError(f"oidc-provider did not start: {line}")

    def token(self, resource: str, client_id: str) -> str:
        response = httpx2.post(f"{self.issuer}/token", data={"grant_type": "client_credentials", "resource": resource,
                                                              "scope": "kg:read"}, auth=(client_id, SECRET), timeout=60)
        response.raise_for_status()
        return response.json()["access_token"]

    def introspections(self) -> int:
        return httpx2.get(f"{self.issuer}/_test/counts", timeout=60).json().get("/token/introspection", 0)

    def close(self) -> None:
        stop(self.process)
        self.script.unlink(missing_ok=True)


class Server:
    """`kg-mcp serve` with the issuer and the rate limit, its log in the work folder."""

    def __init__(self, store: Path, work: Path, issuer: str, port: int, rate_limit: int):
        self.url = f"http://127.0.0.1:{port}/mcp"
        path = os.environ.get(SERVER_PATH_ENV)
        env = dict(os.environ, PYTHONUNBUFFERED="1", KG_MCP_BENCH_SECRET=SERVER_SECRET)
        if path:  # `python -m` puts the working folder first on sys.path: run from there too
            env["PYTHONPATH"] = path
        command = [sys.executable, "-m", "kg_mcp", "serve", "--transport", "http", "--port", str(port),
                   "--store", str(store.resolve()), "--oauth-issuer", issuer, "--public-url", self.url,
                   "--oauth-client-id", "kg-mcp", "--oauth-client-secret-env", "KG_MCP_BENCH_SECRET"]
        if rate_limit:
            command += ["--rate-limit", str(rate_limit)]
        self.log = work / "hostile-tokens-server.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=path or str(REPO))
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", timeout=120)
        except TimeoutError:
            self.close()
            raise RuntimeError(f"kg-mcp serve did not start: {self.log.read_text()[-1000:]}") from None
        code = "import kg_mcp, os; print(os.path.dirname(kg_mcp.__file__))"
        self.package = subprocess.run([sys.executable, "-c", code], env=env, cwd=path or str(REPO),
                                      capture_output=True, text=True, check=False).stdout.strip()

    def close(self) -> None:
        stop(self.process)


async def bystander(url: str, token: str, seconds: float, offset: float = 0.0) -> tuple[list[float], int]:
    """(latencies in s, failures) of one bystander's calls for `seconds`, one PACE_S after the last
    ended, the first `offset` s from now (so that bystanders do not call in step)."""
    latencies, failures = [], 0
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            ends = time.monotonic() + seconds
            await asyncio.sleep(offset)
            while time.monotonic() < ends:
                started = time.perf_counter()
                try:
                    failures += bool((await client.call_tool(*CALL)).is_error)
                except Exception:  # noqa: BLE001 - a refused or failed call is what is measured
                    failures += 1
                latencies.append(time.perf_counter() - started)
                await asyncio.sleep(PACE_S)
    return latencies, failures


def flooder(port: int, connections: int, seconds: float, address: str = "127.0.0.2") -> subprocess.Popen:
    """The flood in a process of its own (bench/token_flood.py, the standard library only: its start
    costs the machine little), so that its work is not the bystanders' event loop's."""
    command = [sys.executable, "-m", "bench.token_flood", str(port), address, str(connections), str(seconds)]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)


async def bystanders(url: str, tokens: list[str], seconds: float) -> tuple[list[float], int]:
    """Every bystander's calls for `seconds` at once, their first calls spread over PACE_S."""
    found = await asyncio.gather(*(bystander(url, token, seconds, i * PACE_S / len(tokens))
                                   for i, token in enumerate(tokens)))
    return [s for latencies, _ in found for s in latencies], sum(failed for _, failed in found)


def ms(values: list[float], q: float) -> float:
    return percentile(values, q) * 1e3


def measure(work: Path, rounds: int, seconds: float, connections: int, rate_limit: int, count: int) -> dict:
    store = metaqa_store(work)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    provider = OpenIdProvider(work, url, count)
    try:
        server = Server(store, work, provider.issuer, port, rate_limit)
        try:
            tokens = [provider.token(url, f"bystander-{i}") for i in range(count)]
            asyncio.run(bystanders(url, tokens, 2.0))  # warm: sessions, keys, caches
            found = {"package": server.package, "idle": [], "idle_failed": 0, "during": [], "during_failed": 0,
                     "statuses": Counter(), "introspections": 0, "loads": [], "idle_cpu": 0.0, "flood_cpu": 0.0,
                     "flooder_cpu": 0.0}
            pid = server.process.pid
            for _ in range(rounds):
                cpu = _cpu_s(pid)
                idle, failed = asyncio.run(bystanders(url, tokens, seconds))
                found["idle_cpu"] += _cpu_s(pid) - cpu
                found["idle"] += idle
                found["idle_failed"] += failed
                asked, cpu = provider.introspections(), _cpu_s(pid)
                flood = flooder(port, connections, seconds)
                during, failed = asyncio.run(bystanders(url, tokens, seconds))
                found["flood_cpu"] += _cpu_s(pid) - cpu
                found["during"] += during
                found["during_failed"] += failed
                waited = resource.getrusage(resource.RUSAGE_CHILDREN)
                found["statuses"].update(json.loads(flood.communicate(timeout=seconds + 120)[0]))
                ended = resource.getrusage(resource.RUSAGE_CHILDREN)
                found["flooder_cpu"] += ended.ru_utime + ended.ru_stime - waited.ru_utime - waited.ru_stime
                found["introspections"] += provider.introspections() - asked
                found["loads"].append(os.getloadavg()[0])
            return found
        finally:
            server.close()
    finally:
        provider.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="idle, then flooded, this many times")
    parser.add_argument("--seconds", type=float, default=10.0, help="idle, then under the flood, each, in each round")
    parser.add_argument("--connections", type=int, default=128)
    parser.add_argument("--rate-limit", type=int, default=60, help="the server's --rate-limit (0: none)")
    parser.add_argument("--bystanders", type=int, default=8, help="signed-in callers, each calling once a second")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("KG_MCP_BENCH_DIR", ".bench")))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    found = measure(args.work, args.rounds, args.seconds, args.connections, args.rate_limit, args.bystanders)
    idle, during = found["idle"], found["during"]
    loads = " ".join(f"{x:.2f}" for x in found["loads"])
    print(f"server: {found['package']}; --rate-limit {args.rate_limit or 'off'}; 1-minute load average after each "
          f"flood: {loads}")
    print(f"{f'{args.bystanders} bystanders get_relations':30} {'calls':>6} {'failed':>6} {'p50 ms':>8} {'p99 ms':>8}")
    print(f"{'idle':30} {len(idle):6} {found['idle_failed']:6} {ms(idle, 0.5):8.1f} {ms(idle, 0.99):8.1f}")
    print(f"{'under the flood':30} {len(during):6} {found['during_failed']:6} {ms(during, 0.5):8.1f} {ms(during, 0.99):8.1f}")
    print(f"p99 under the flood / idle: {ms(during, 0.99) / ms(idle, 0.99):.2f} (bar: <= 2); "
          f"p50: {ms(during, 0.5) / ms(idle, 0.5):.2f}")
    answered = ", ".join(f"{status}: {count:,}" for status, count in sorted(found["statuses"].items()))
    print(f"{args.rounds} floods of {args.seconds:g} s from 127.0.0.2, {args.connections} connections: {answered}; "
          f"introspections sent to the issuer: {found['introspections']:,}")
    window = args.rounds * args.seconds
    print(f"server CPU: {found['idle_cpu'] / window:.0%} of a core idle (the bystanders' calls), "
          f"{found['flood_cpu'] / window:.0%} under the flood; the flooder's own: {found['flooder_cpu'] / window:.0%}")


if __name__ == "__main__":
    main()
