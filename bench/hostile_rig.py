"""The rig behind bench/hostile.py: a `kg-mcp serve` to attack, what it uses, and the clients.

`Served` runs `kg-mcp serve --transport http --auth-token-env ... --store S --enable-sparql` on a
free loopback port, its log in a file (its size is a measure), its open-file limit set to the
common 1,024 (the server may raise it itself), and reads its RSS and CPU from /proc. `RawSession`
speaks MCP over plain HTTP (initialize, then JSON-RPC posts), for attackers that are cheap to
cancel; `LightClient` is the SDK's own `Client`, an innocent user whose latency is measured.
`Canary` is an HTTP server on 127.0.0.1 counting who reaches it. Nothing leaves 127.0.0.0/8.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import REPO, Row, free_port, percentile, stop, wait_http

TOKEN = "kgmcp-hostile-bench-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# The innocent user's calls: a small film and a name lookup on MetaQA.
LIGHT = [
    ("get_relations", {"entity": "kg:Catch_Me_If_You_Can"}),
    ("find_entities", {"name": "Catch Me If You Can"}),
]
SERVER_PATH_ENV = "KG_MCP_BENCH_SERVER_PATH"  # serve the kg_mcp package found here (e.g. an old worktree)
_TICK = os.sysconf("SC_CLK_TCK")


def initialize(request_id: int | str = 1) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "hostile-bench", "version": "1"},
        },
    }


class Served:
    """A `kg-mcp serve` subprocess over HTTP with the token; stopped (with its query workers) on exit."""

    def __init__(
        self, store: Path, work: Path, *extra: str, nofile: int = 1024, endpoint: str | None = None, env: dict | None = None
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = work / "hostile-server.log"
        path = os.environ.get(SERVER_PATH_ENV)
        env = dict(os.environ, PYTHONUNBUFFERED="1", KG_MCP_BENCH_TOKEN=TOKEN, **(env or {}))
        if path:  # `python -m` puts the working folder first on sys.path: run from there too
            env["PYTHONPATH"] = path
        self.cwd = path or str(REPO)
        self.env = env
        command = [sys.executable, "-m", "kg_mcp", "serve", "--transport", "http", "--port", str(self.port)]
        source = ["--sparql", endpoint] if endpoint else ["--store", str(store.resolve())]
        command += ["--auth-token-env", "KG_MCP_BENCH_TOKEN", *source, "--enable-sparql", *extra]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=self.cwd
            )
        self.pid = self.process.pid
        _, hard = resource.prlimit(self.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(self.pid, resource.RLIMIT_NOFILE, (min(nofile, hard), hard))
        try:
            wait_http(f"http://127.0.0.1:{self.port}/")
        except TimeoutError:
            self.__exit__()
            raise RuntimeError(f"kg-mcp serve did not start: {self.log_tail()}") from None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        children = descendants(self.pid)
        stop(self.process)
        kill(children)  # a worker left computing would outlive the run

    def package(self) -> str:
        """Where the served kg_mcp package comes from (the before/after runs must say which)."""
        code = "import kg_mcp, os; print(os.path.dirname(kg_mcp.__file__))"
        return subprocess.run(
            [sys.executable, "-c", code],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()

    def log_bytes(self) -> int:
        return self.log_path.stat().st_size

    def log_tail(self, chars: int = 300) -> str:
        return self.log_path.read_bytes()[-chars:].decode("utf-8", "replace")

    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def workers_rss_mb(self) -> float:
        """Resident memory of the server's child processes (its query workers), summed."""
        return sum(rss_mb(pid) for pid in descendants(self.pid))

    def kill_workers(self) -> None:
        kill(descendants(self.pid))

    def cpu_s(self) -> float:
        """CPU seconds of the server, its waited-for children and its live ones."""
        return _cpu_s(self.pid, children=True) + sum(_cpu_s(pid) for pid in descendants(self.pid))


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _cpu_s(pid: int, children: bool = False) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = fields[11:15] if children else fields[11:13]  # utime stime (cutime cstime)
    return sum(int(t) for t in ticks) / _TICK


def descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        kids = [child for child, parent in parents.items() if parent in frontier]
        found += kids
        frontier = kids
    return found


def kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class RawSession:
    """An MCP session over bare HTTP posts: cheap to open by the thousand and to abandon mid-call."""

    def __init__(self, http: httpx2.AsyncClient, url: str):
        self.http, self.url, self.session_id, self.ids = http, url, None, 1

    async def open(self) -> int:
        """Initialize (and say initialized); the status code of the initialize post."""
        response = await self.http.post(self.url, json=initialize(), headers=HEADERS | AUTH)
        self.session_id = response.headers.get("mcp-session-id")
        if response.status_code == 200:
            notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await self.http.post(self.url, json=notice, headers=self.headers())
        return response.status_code

    def headers(self) -> dict:
        return HEADERS | AUTH | ({"mcp-session-id": self.session_id} if self.session_id else {})

    async def post(self, message: dict) -> tuple[int, str]:
        response = await self.http.post(self.url, content=json.dumps(message), headers=self.headers())
        return response.status_code, response.text

    async def call(self, tool: str, arguments: dict) -> dict:
        """The JSON-RPC answer to tools/call (`result` or `error`)."""
        self.ids += 1
        _, text = await self.post(
            {
                "jsonrpc": "2.0",
                "id": self.ids,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        )
        return answer(text)


async def open_sessions(http: httpx2.AsyncClient, url: str, count: int) -> list[RawSession]:
    """`count` MCP sessions over `http`, opened at once."""
    sessions = [RawSession(http, url) for _ in range(count)]
    await asyncio.gather(*(s.open() for s in sessions))
    return sessions


def answer(text: str) -> dict:
    """The JSON-RPC message in a JSON or an event-stream body (its last data line)."""
    data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    try:
        return json.loads(data[-1] if data else text)
    except (ValueError, IndexError):
        return {"error": {"message": f"not JSON-RPC: {text[:200]}"}}


def result_text(message: dict) -> str:
    if "error" in message:
        return str(message["error"].get("message", ""))
    content = message.get("result", {}).get("content") or [{}]
    return content[0].get("text", "")


class LightClient:
    """The SDK's client with a session of its own, calling the light tools and timing them; from
    `address` (another loopback address than the attackers': another caller) when given."""

    def __init__(self, url: str, timeout: float = 120, address: str | None = None, calls: list | None = None):
        self.url, self.timeout, self.address, self.calls = url, timeout, address, calls or LIGHT

    async def __aenter__(self) -> Self:
        transport = httpx2.AsyncHTTPTransport(local_address=self.address) if self.address else None
        self._http = httpx2.AsyncClient(headers=AUTH, timeout=self.timeout, transport=transport)
        self._client = Client(streamable_http_client(self.url, http_client=self._http))
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        try:  # in this task: the SDK's cancel scopes belong to it (the HTTP timeout bounds the close)
            await self._client.__aexit__(*exc)
        finally:
            await self._http.aclose()

    async def run(
        self, count: int | None = None, until: asyncio.Event | None = None, timeout: float | None = None
    ) -> tuple[list[float], int]:
        """(latencies in s, failures) of `count` calls, or of calls until `until` is set; a call
        past the timeout counts as the timeout and as a failure."""
        latencies, failures, i = [], 0, 0
        timeout = timeout or self.timeout
        while (count is not None and i < count) or (until is not None and not until.is_set()):
            tool, arguments = self.calls[i % len(self.calls)]
            started = time.perf_counter()
            try:
                result = await asyncio.wait_for(self._client.call_tool(tool, arguments), timeout)
                failures += bool(result.is_error)
            except Exception:  # noqa: BLE001 - a refused or stuck call is what is measured
                failures += 1
            latencies.append(time.perf_counter() - started)
            i += 1
            if until is not None:
                await asyncio.sleep(0.05)
        return latencies, failures


class Canary:
    """An HTTP server on 127.0.0.1 that counts requests and answers one SPARQL result row."""

    ROW = (
        b'{"head":{"vars":["s"]},"results":{"bindings":[{"s":{"type":"literal","value":"canary-reached"}}]}}'
    )

    def __init__(self):
        self.hits: list[str] = []
        canary = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                canary.hits.append(f"{self.command} {self.path} {self.headers.get('User-Agent')}")
                self.send_response(200)
                self.send_header("Content-Type", "application/sparql-results+json")
                self.send_header("Content-Length", str(len(canary.ROW)))
                self.end_headers()
                self.wfile.write(canary.ROW)

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class Sampler:
    """Samples a reading every `every` seconds in a thread; `peak` is the highest seen."""

    def __init__(self, read, every: float = 0.1, stop_above: float | None = None, on_stop=None):
        self.read, self.every, self.stop_above, self.on_stop = read, every, stop_above, on_stop
        self.peak, self.stopped, self._done = 0.0, False, threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._done.is_set():
            value = self.read()
            self.peak = max(self.peak, value)
            if self.stop_above is not None and value > self.stop_above and not self.stopped:
                self.stopped = True  # the bench's own safety cap: the machine is shared
                self.on_stop()
            self._done.wait(self.every)


def ms(values: list[float], q: float) -> float:
    """The q-quantile of `values` (seconds) in milliseconds."""
    return percentile(values, q) * 1e3


def latency_rows(
    name: str, base: list[float], during: list[float], failures: int, goal: str = "<= 20"
) -> list[Row]:
    """The light calls' p99 under an attack against their p99 before it."""
    note = f"p50 {ms(during, 0.5):.0f} ms vs {ms(base, 0.5):.0f} ms; {len(during)} light calls, {failures} failed or timed out"
    return [Row(f"{name}: light call p99", ms(during, 0.99), ms(base, 0.99), "ms", goal, note)]


BAR_MS = 2000.0  # issue 31: a bystander served within 2 s p99 under each attack


def bystander_rows(name: str, during: list[float], failures: int, base: list[float] | None = None) -> list[Row]:
    """The bystander's (another caller's) light calls while the attack runs, against the 2 s bar."""
    before = f", {ms(base, 0.5):.0f}/{ms(base, 0.99):.0f} ms before the attack" if base else ""
    note = (f"p50 {ms(during, 0.5):.0f} ms{before}; {len(during)} light calls from another address, "
            f"{failures} failed or timed out")
    return [Row(f"{name}: bystander p99", ms(during, 0.99), BAR_MS, "ms", "<= 1", note)]


async def looped(call) -> int:
    """Await `call()` again and again until cancelled; how many finished."""
    done = 0
    try:
        while True:
            await call()
            done += 1
    except asyncio.CancelledError:
        return done


async def during_attack(light: LightClient, attack_s: float, *attackers) -> tuple[list[float], int, list[int]]:
    """The bystander's light calls for `attack_s` while `attackers` (`looped` coroutines) run, then
    the attackers cancelled: (latencies, failures, calls each attacker finished)."""
    tasks = [asyncio.ensure_future(a) for a in attackers]
    await asyncio.sleep(1.0)  # the attack is under way
    done = asyncio.Event()
    asyncio.get_running_loop().call_later(attack_s, done.set)
    during, failures = await light.run(until=done, timeout=attack_s + 30)
    for task in tasks:
        task.cancel()
    finished = await asyncio.gather(*tasks, return_exceptions=True)
    return during, failures, [f if isinstance(f, int) else -1 for f in finished]


class Endpoint:
    """`oxigraph serve-read-only` over a store on a free loopback port (the MetaQA store: the same KG
    as the local cases); `url` is its query URL. Stopped on exit, with whatever it still computes."""

    def __init__(self, store: Path):
        cli = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
        port = free_port()
        self.process = subprocess.Popen(
            [cli, "serve-read-only", "--location", str(store.resolve()), "--bind", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{port}/query"
        wait_http(f"http://127.0.0.1:{port}/")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        stop(self.process)

    def cpu_s(self) -> float:
        return _cpu_s(self.process.pid)


def load() -> str:
    """The load average, noted with each attack: the machine is shared."""
    return "load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())
