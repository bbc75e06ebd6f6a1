"""Loopback rigs for fault, rate-limit and soak tests (also used by bench/soak.py).

`FaultProxy` is a real HTTP proxy, in a thread on 127.0.0.1, in front of a SPARQL endpoint
(`oxigraph serve`): each request is forwarded, or first delayed, held, dropped, or answered
500 / 429 with Retry-After instead, as scripted. Rules match on the SPARQL text of the request,
so one client's queries can fail while another's pass through the same kg-mcp server.

`kg_mcp_server` runs `kg-mcp serve` as a subprocess on a free loopback port and stops it.
Nothing here reaches beyond 127.0.0.0/8.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}


@dataclass
class Fault:
    """What the proxy does with a request.

    kind: "pass" (forward), "status" (answer `status` with `headers` and `body`), "drop" (close the
    connection without answering), "delay" (wait `delay_s`, then do `then`), "hold" (wait until
    `release` is set, at most `delay_s` or 120 s, then do `then`). Waits end when the proxy stops.
    """

    kind: str = "pass"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay_s: float = 0.0
    release: threading.Event | None = None
    then: Fault | None = None

    @staticmethod
    def error(status: int = 500, retry_after: str | None = None, body: bytes = b"injected fault") -> Fault:
        return Fault("status", status=status, headers={"Retry-After": retry_after} if retry_after else {}, body=body)


PASS = Fault()


@dataclass
class Rule:
    fault: Fault
    match: Callable[[str], bool]
    times: int | None  # None: every matching request
    used: int = 0


@dataclass
class Seen:
    at: float
    query: str
    fault: str
    thread: str


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of `upstream`, injecting scripted faults.

    `url` is the proxy's address with the upstream's path, ready for open_endpoint / --sparql.
    Rules are tried in the order added; the first that matches and has uses left applies.
    """

    def __init__(self, upstream: str):
        parsed = urllib.parse.urlsplit(upstream)
        assert parsed.hostname in ("127.0.0.1", "localhost", "::1"), "the proxy only fronts loopback endpoints"
        self.upstream_host, self.upstream_port = parsed.hostname, parsed.port or 80
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                query = proxy._query_of(self.path, body, self.headers.get("Content-Type", ""))
                fault = proxy._choose(query)
                with proxy.lock:
                    proxy.seen.append(Seen(time.monotonic(), query, fault.kind, threading.current_thread().name))
                proxy._apply(fault, self, body)

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{parsed.path or '/'}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True, name="fault-proxy")

    # --- scripting ---------------------------------------------------------------------------
    def add(self, fault: Fault, *, match: Callable[[str], bool] | str | None = None, times: int | None = None) -> Rule:
        """Apply `fault` to requests whose SPARQL matches (a substring, a predicate, or all), `times` times."""
        if isinstance(match, str):
            needle = match
            match = lambda query: needle in query  # noqa: E731
        rule = Rule(fault, match or (lambda query: True), times)
        with self.lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
            self.seen.clear()

    def count(self, kind: str | None = None, match: str | None = None) -> int:
        with self.lock:
            return sum(1 for s in self.seen if (kind is None or s.fault == kind) and (match is None or match in s.query))

    @property
    def injected(self) -> int:
        """Requests that got a fault rather than a plain pass-through."""
        with self.lock:
            return sum(1 for s in self.seen if s.fault != "pass")

    # --- the proxy ---------------------------------------------------------------------------
    @staticmethod
    def _query_of(path: str, body: bytes, content_type: str) -> str:
        if "application/x-www-form-urlencoded" in content_type:
            return "".join(urllib.parse.parse_qs(body.decode("utf-8", "replace")).get("query", []))
        if "application/sparql-query" in content_type:
            return body.decode("utf-8", "replace")
        return "".join(urllib.parse.parse_qs(urllib.parse.urlsplit(path).query).get("query", []))

    def _choose(self, query: str) -> Fault:
        with self.lock:
            for rule in self.rules:
                if (rule.times is None or rule.used < rule.times) and rule.match(query):
                    rule.used += 1
                    return rule.fault
        return PASS

    def _apply(self, fault: Fault, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if fault.kind in ("delay", "hold"):
            if fault.kind == "hold":
                assert fault.release is not None, "a hold needs its release event"
                fault.release.wait(fault.delay_s or 120)  # bounded, like everything here
            else:
                self.stopping.wait(fault.delay_s)
            if self.stopping.is_set():
                handler.close_connection = True
                return
            return self._apply(fault.then or PASS, handler, body)
        try:
            if fault.kind == "drop":
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            if fault.kind == "status":
                status, headers, payload = fault.status, {"Content-Type": "text/plain", **fault.headers}, fault.body
            else:
                status, headers, payload = self._forward(handler, body)
            handler.send_response(status)
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:  # the client gave up meanwhile
            handler.close_connection = True

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, dict[str, str], bytes]:
        upstream = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
            upstream.request(handler.command, handler.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            out = {k: v for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP}
            return response.status, out, payload
        finally:
            upstream.close()

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        with self.lock:
            for rule in self.rules:
                if rule.fault.release is not None:
                    rule.fault.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


# --- kg-mcp serve as a subprocess -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_up(url: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # any HTTP answer: it is up
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"kg-mcp serve did not answer at {url} within {timeout} s (rc={process.poll()})")


@dataclass
class ServerProcess:
    process: subprocess.Popen
    base: str  # http://127.0.0.1:PORT
    stdout_path: Path
    stderr_path: Path

    @property
    def url(self) -> str:
        return self.base + "/mcp"

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> tuple[str, str]:
        return (
            self.stdout_path.read_text(encoding="utf-8", errors="replace"),
            self.stderr_path.read_text(encoding="utf-8", errors="replace"),
        )


@contextmanager
def kg_mcp_server(*args: str, env: dict[str, str] | None = None, transport: str = "http", timeout: float = 60) -> Iterator[ServerProcess]:
    """`kg-mcp serve ARGS --transport T --port P` on a free loopback port; always stopped (SIGTERM, then SIGKILL).

    Its stdout and stderr go to files (a pipe nobody reads could fill and stall a chatty server).
    """
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="kg-mcp-serve-"))
    stdout_path, stderr_path = workdir / "stdout", workdir / "stderr"
    full_env = {**os.environ, **(env or {})}
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "kg_mcp", "serve", *args, "--transport", transport, "--port", str(port)],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=full_env,
        )
    server = ServerProcess(process, f"http://127.0.0.1:{port}", stdout_path, stderr_path)
    try:
        _wait_up(server.base + "/", process, timeout)
        yield server
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


def rss_kib(pid: int) -> int:
    """Resident memory of a process, from /proc/PID/status (KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    """Open file descriptors of a process, from /proc/PID/fd."""
    return len(os.listdir(f"/proc/{pid}/fd"))
