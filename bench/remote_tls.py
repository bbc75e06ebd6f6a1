"""Keep-alive on a distant HTTPS endpoint: `oxigraph serve` behind TLS and added network latency.

    client --(+latency each way)--> relay --> TLS terminator (self-signed, trustme) --> oxigraph

The latency relay delays every chunk in both directions, so a TLS handshake costs round trips as
it would across a network. Ours: the remote backend's transport (pooled, kept alive). Baseline:
a new connection per query, as urllib (and SPARQLWrapper, which kg-mcp used before) makes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path

from bench.common import Row, free_port, paired_medians, start, stop, wait_http
from bench.store_measures import metaqa_store
from kg_mcp.backends.http_transport import SparqlHttp

QUERY = "SELECT ?p ?o WHERE { <http://kg-mcp.local/entity/Catch_Me_If_You_Can> ?p ?o }"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    """Forward bytes, each chunk `delay_s` after it arrived, in order."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def take() -> None:
        while data := await reader.read(1 << 16):
            await queue.put((loop.time() + delay_s, data))
        await queue.put((loop.time() + delay_s, b""))

    async def give() -> None:
        while True:
            at, data = await queue.get()
            await asyncio.sleep(max(0.0, at - loop.time()))
            if not data:
                break
            writer.write(data)
            await writer.drain()
        writer.close()

    try:
        await asyncio.gather(take(), give())
    except (ConnectionError, OSError):
        writer.close()


def _relay(port: int, target_port: int, delay_s: float, tls: ssl.SSLContext | None):
    async def handle(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer, delay_s), _pipe(up_reader, writer, delay_s))
        except asyncio.CancelledError:  # the bench is over: end quietly
            writer.close()
            up_writer.close()

    return asyncio.start_server(handle, "127.0.0.1", port, ssl=tls)


class _Network(threading.Thread):
    """The TLS terminator and the latency relay, on an event loop of their own."""

    def __init__(self, upstream_port: int, one_way_s: float, tls: ssl.SSLContext):
        super().__init__(daemon=True)
        self.port, self.tls_port = free_port(), free_port()
        self.upstream_port, self.one_way_s, self.tls = upstream_port, one_way_s, tls
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()

    def run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(_relay(self.tls_port, self.upstream_port, 0.0, self.tls))
        self.loop.run_until_complete(_relay(self.port, self.tls_port, self.one_way_s, None))
        self.ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        if self.ready.is_set():
            asyncio.run_coroutine_threadsafe(self._cancel_all(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.join(10)

    async def _cancel_all(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def tls_keepalive(work: Path, repeats: int, one_way_ms: float = 10.0) -> list[Row]:
    import trustme

    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server_tls)
    ca_file = work / "bench-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    cli = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    oxigraph_port = free_port()
    store = str(metaqa_store(work))
    server = start([cli, "serve-read-only", "--location", store, "--bind", f"127.0.0.1:{oxigraph_port}"])
    network = _Network(oxigraph_port, one_way_ms / 1000, server_tls)
    saved = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = str(ca_file)  # both clients trust the bench's CA this way
    try:
        wait_http(f"http://127.0.0.1:{oxigraph_port}/")
        network.start()
        network.ready.wait(10)
        url = f"https://localhost:{network.port}/query"
        pooled = SparqlHttp(url, user_agent="kg-mcp bench", timeout_s=30, retries=0)
        fresh_tls = ssl.create_default_context()
        body = urllib.parse.urlencode({"query": QUERY}).encode()

        def new_connection(i: int) -> bytes:
            request = urllib.request.Request(url, data=body, headers={"Accept": "application/sparql-results+json"})
            with urllib.request.urlopen(request, timeout=30, context=fresh_tls) as response:
                return response.read()

        assert pooled.fetch(QUERY) == new_connection(0)  # the same answer both ways
        base, ours = paired_medians(new_connection, lambda i: pooled.fetch(QUERY), repeats, warmup=2)
        pooled.close()
    finally:
        if saved is None:
            os.environ.pop("SSL_CERT_FILE", None)
        else:
            os.environ["SSL_CERT_FILE"] = saved
        network.stop()
        stop(server)
    return [
        Row(
            f"remote call over TLS, +{2 * one_way_ms:g} ms round trip",
            ours * 1e3,
            base * 1e3,
            "ms",
            "<= 0.7",
            "ours: kept-alive pooled connection; baseline: a new connection (TCP + TLS) per query, as before",
        )
    ]
