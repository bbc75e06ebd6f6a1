"""How a remote backend fetches SPARQL results: pooled keep-alive connections, one deadline a call.

One `httpx2.Client` (the HTTP client the MCP SDK installs) per endpoint keeps its connections
open, so a call to an HTTPS endpoint such as Wikidata's pays the TCP and TLS handshakes once,
not on every query. Within a call's deadline (`timeout_s`), 429 and 5xx answers and dropped
connections are retried with exponential backoff, honouring Retry-After; past it, or when the
endpoint cannot be reached, the call fails with an EndpointError that says what happened. The
body streams to a reader (kg_mcp.backends.engine_answers) in pieces, each against the deadline, so
an endpoint that trickles bytes cannot hold a call for ever; when the reader stops early (it has
the rows it counts, or the answer passed its byte cap) the connection is closed rather than read
to its end, which also tells the engine its client has gone. Certificates are checked against the
system's CAs (and SSL_CERT_FILE, if set).

Every query also carries the engine's own time limit (`engine_timeout`), so that an engine stops
a query kg-mcp has given up on instead of computing on for minutes.
"""

from __future__ import annotations

import email.utils
import logging
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

import httpx2

from kg_mcp.backends import graph_access
from kg_mcp.backends.engine_answers import refuse_if_too_heavy
from kg_mcp.errors import EndpointError, InvalidInput

log = logging.getLogger(__name__)

_RETRY_STATUS = {429, 500, 502, 503, 504}
_BACKOFF_START_S = 0.5
_RESULTS_JSON = "application/sparql-results+json, application/json;q=0.9"
_FETCH_MAX_BYTES = 64 * 2**20  # `fetch` (whole answers as bytes, for measures) reads no more than this
_ERROR_TEXT_BYTES = 4096
T = TypeVar("T")
Reader = Callable[[Iterator[bytes], Mapping[str, str]], T]


# --- the engine's own time limit -----------------------------------------------------------------
# Engines name their limit differently and count it in different units, so a form field is sent
# only to an engine recognised by its Server header (or named by --text-search); until then, and to
# others, only Blazegraph's header goes, which any other engine ignores; a `timeout` already in the
# endpoint URL is left alone. Checked: Virtuoso 7.2 cuts the query and answers what it has (the
# answer is flagged partial), and `oxigraph serve` (which has no such limit) accepts the field and
# the header as harmless.
_ENGINE_SERVERS = (
    ("virtuoso", "virtuoso"), ("fuseki", "fuseki"), ("qlever", "qlever"), ("graphdb", "rdf4j"), ("rdf4j", "rdf4j")
)  # fmt: skip


def engine_timeout(engine: str | None, seconds: float) -> tuple[dict[str, str], dict[str, str]]:
    """The form fields and headers that ask `engine` to stop a query after about `seconds`.

    Virtuoso: `timeout` in ms, restarted for each phase (rows, grouping, ordering), so half the
    time is asked. QLever: `timeout` with a unit ("12.5s"). Fuseki, GraphDB and RDF4J: `timeout` in
    seconds (Fuseki applies it where the dataset allows overrides). Blazegraph:
    X-BIGDATA-MAX-QUERY-MILLIS, sent to every engine."""
    seconds = max(1.0, seconds)
    headers = {"X-BIGDATA-MAX-QUERY-MILLIS": str(int(seconds * 1000))}
    if engine == "virtuoso":
        return {"timeout": str(int(seconds * 500))}, headers
    if engine == "qlever":
        return {"timeout": f"{seconds:.1f}s"}, headers
    if engine in ("fuseki", "rdf4j"):
        return {"timeout": str(int(seconds))}, headers
    return {}, headers


# Engines recognised so far, by endpoint URL: a backend opened later (kg_mcp.backends.open_endpoint
# probes with one backend, then serves with another) starts knowing its engine.
_ENGINES_SEEN: dict[str, str] = {}


def engine_of(headers) -> str | None:
    """The engine an answer came from, by its Server header; None when not one named above."""
    server = headers.get("server", "").lower()
    if "fuseki-request-id" in headers:
        return "fuseki"
    return next((engine for name, engine in _ENGINE_SERVERS if name in server), None)


class _Retryable(Exception):
    """A failure worth another attempt: `problem` says what happened, `wait` what the server asked."""

    def __init__(self, problem: str, wait: float | None = None):
        super().__init__(problem)
        self.problem, self.wait = problem, wait


class SparqlHttp:
    """POSTs queries to one endpoint over kept-alive connections; thread-safe (calls run on threads)."""

    def __init__(
        self,
        url: str,
        *,
        user_agent: str,
        timeout_s: float,
        retries: int,
        connections: int = 16,
        engine: str | None = None,
        graphs: tuple[str, ...] = (),
    ):
        self.url = url
        # The dataset of every query (kg_mcp.backends.named_graphs): the protocol's own parameters,
        # so that no query text changes. Both are sent: the default graph is their merge, and
        # GRAPH patterns see those graphs only (Virtuoso otherwise lets them see every graph).
        self.graphs = tuple(graphs)
        self.timeout_s = timeout_s
        self.retries = retries
        # For engine_timeout: named by the caller, or read from the answers' headers.
        self.engine = engine or _ENGINES_SEEN.get(url)
        # A `timeout` the operator put in the endpoint URL is theirs: ours would override it.
        self._url_sets_timeout = "timeout" in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        self.client = httpx2.Client(
            headers={"User-Agent": user_agent, "Accept": _RESULTS_JSON},
            limits=httpx2.Limits(max_connections=connections, max_keepalive_connections=connections),
            verify=ssl.create_default_context(),
            follow_redirects=True,
        )

    def fetch(self, query: str) -> bytes:
        """The endpoint's whole answer to `query` as bytes (at most 64 MB), within the deadline."""

        def whole(chunks: Iterator[bytes], headers: Mapping[str, str]) -> bytes:
            body = bytearray()
            for chunk in chunks:
                body += chunk
                if len(body) > _FETCH_MAX_BYTES:
                    raise EndpointError(f"The endpoint {self.url} answered more than {_FETCH_MAX_BYTES // 2**20} MB.")
            return bytes(body)

        return self.answer(query, whole)

    def answer(self, query: str, read: Reader[T], graphs: tuple[str, ...] | None = None) -> T:
        """`read(chunks, headers)` over the endpoint's answer to `query`, within the deadline, retried
        where retrying can help (each attempt with a fresh `read`). Whatever `read` leaves unread is
        never fetched: the connection is closed.

        `graphs` replaces the dataset for this query (an empty tuple: the endpoint as it answers);
        by default it is the calling client's graphs (kg_mcp.backends.graph_access), else the server's."""
        graphs = graph_access.dataset(self.graphs) if graphs is None else graphs
        deadline = time.monotonic() + self.timeout_s
        backoff = _BACKOFF_START_S
        last_problem = "no attempt was made"
        for attempt in range(self.retries + 1):
            if deadline - time.monotonic() <= 0:
                break
            try:
                return self._request(query, deadline, graphs, read)
            except _Retryable as retryable:
                last_problem, wait = retryable.problem, retryable.wait
            if wait is not None and time.monotonic() + wait >= deadline:
                # Waiting as asked would pass the deadline: say so now rather than sleep first.
                raise EndpointError(
                    f"The endpoint {self.url} answered {last_problem} and asked to wait {wait:.0f} s before "
                    f"trying again, longer than this call's {self.timeout_s:g} s limit allows.",
                    "The KG service is rate-limiting or busy; wait before calling again.",
                )
            delay = backoff if wait is None else wait
            backoff *= 2
            if attempt == self.retries or time.monotonic() + delay >= deadline:
                break
            log.info("endpoint %s: %s; retrying in %.1f s", self.url, last_problem, delay)
            time.sleep(delay)
        raise EndpointError(
            f"The endpoint {self.url} did not answer: {last_problem}.",
            "The KG service is slow or unavailable; try again later or with a narrower call.",
        )

    def _request(self, query: str, deadline: float, graphs: tuple[str, ...], read: Reader[T]) -> T:
        remaining = max(0.001, deadline - time.monotonic())
        # The engine stops a little before this call gives up, so that what it found can still arrive.
        fields, headers = engine_timeout(self.engine, remaining * 0.9 - 0.5)
        if self._url_sets_timeout:
            fields = {}
        if graphs:
            fields = {**fields, "default-graph-uri": list(graphs), "named-graph-uri": list(graphs)}
        try:
            with self.client.stream(
                "POST", self.url, data={"query": query, **fields}, headers=headers, timeout=remaining
            ) as response:
                if self.engine is None and (engine := engine_of(response.headers)) is not None:
                    self.engine = _ENGINES_SEEN[self.url] = engine
                if response.status_code != 200:
                    self._refuse(response)
                return read(self._chunks(response, deadline), dict(response.headers.items()))
        except httpx2.ConnectTimeout:
            raise _Retryable(f"timed out (no connection within {self.timeout_s:g} s)") from None
        except httpx2.TimeoutException:
            raise _Retryable(f"timed out (no complete answer within {self.timeout_s:g} s)") from None
        except httpx2.TransportError as e:  # refused, reset, dropped mid-answer, TLS failures
            raise _Retryable(f"it is unreachable (connection failed: {_describe(e)})") from None

    def _chunks(self, response: httpx2.Response, deadline: float) -> Iterator[bytes]:
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise _Retryable(f"timed out (no complete answer within {self.timeout_s:g} s)")
            yield chunk

    def _refuse(self, response: httpx2.Response) -> None:
        """Raise what a non-200 answer means: a bad query, a fault to retry, or a refusal."""
        status = response.status_code
        reason = response.reason_phrase or "no reason given"
        if status == 400:
            message = f"The endpoint rejected the query: {_short(_error_text(response))}"
            raise InvalidInput(message, "Fix the query and try again.")
        if status >= 500:
            refuse_if_too_heavy(self.url, _error_text(response))
        if status in _RETRY_STATUS:
            raise _Retryable(f"HTTP {status} ({reason})", _retry_after(response.headers.get("Retry-After")))
        if status == 404:
            raise EndpointError(f"The endpoint {self.url} answered 404: no SPARQL service at that URL.")
        if status == 401:
            raise EndpointError(f"The endpoint {self.url} answered 401: it needs credentials.")
        raise EndpointError(f"The endpoint {self.url} answered HTTP {status} ({reason}).")

    def close(self) -> None:
        self.client.close()


def _error_text(response: httpx2.Response) -> str:
    """The start of an error answer's text (its first 4 KB: an error page can be long)."""
    head = bytearray()
    for chunk in response.iter_bytes():
        head += chunk
        if len(head) >= _ERROR_TEXT_BYTES:
            break
    return bytes(head[:_ERROR_TEXT_BYTES]).decode(response.encoding or "utf-8", errors="replace")


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _describe(error: Exception) -> str:
    return _short(str(error)) or type(error).__name__


def _short(text: str) -> str:
    return text.replace("\n", " ").strip()[:300]
