"""Any SPARQL endpoint over HTTP, read-only, through SPARQLWrapper.

Each backend call gets one deadline (`timeout_s`). Within it, 429 and 5xx answers and dropped
connections are retried with exponential backoff, honouring Retry-After; past it, or when the
endpoint cannot be reached, the call fails with an EndpointError that says what happened.
Wikimedia refuses generic user agents, so every request names kg-mcp and a contact.
"""

from __future__ import annotations

import email.utils
import logging
import socket
import time
import urllib.error
from http.client import HTTPException

import pyoxigraph as ox
from SPARQLWrapper import JSON, POST, SPARQLWrapper
from SPARQLWrapper import SPARQLExceptions as sw_errors

from kg_mcp import __version__
from kg_mcp.backends import text_search
from kg_mcp.backends.sparql_backend import SparqlBackend
from kg_mcp.errors import EndpointError, InvalidInput

log = logging.getLogger(__name__)

_RETRY_STATUS = {429, 500, 502, 503, 504}
_BACKOFF_START_S = 0.5


class _BadQuery(Exception):
    """The endpoint answered 400: the query is wrong, retrying will not help."""


class RemoteBackend(SparqlBackend):
    kind = "remote"

    def __init__(self, url: str, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.url = url
        self.user_agent = f"kg-mcp/{__version__} ({self.settings.contact}) SPARQLWrapper"
        # A full scan of labels would time out on a large public endpoint; Wikidata has a search API.
        self.label_scan = self.profile.name != "wikidata"
        # The engine's own text search for find_entities: from the settings, the profile (Wikidata's
        # public service has mwapi), or a probe on first use (None until then).
        chosen = self.settings.text_search
        if chosen == "auto" and self.profile.entity_search == "mwapi" and "query.wikidata.org" in url:
            chosen = "mwapi"
        self.text_search: str | None = None if chosen == "auto" else chosen

    @property
    def use_entity_search(self) -> bool:
        return self.text_search == "mwapi"

    # --- transport ------------------------------------------------------------------------------
    def _fetch(self, query: str) -> bytes:
        deadline = time.monotonic() + self.settings.timeout_s
        backoff = _BACKOFF_START_S
        last_problem = "no attempt was made"
        for attempt in range(self.settings.retries + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                return self._request(query, remaining, deadline)
            except _BadQuery as e:
                raise InvalidInput(f"The endpoint rejected the query: {e}", "Fix the query and try again.") from None
            except urllib.error.HTTPError as e:
                if e.code not in _RETRY_STATUS:
                    raise EndpointError(f"The endpoint {self.url} answered HTTP {e.code} ({e.reason}).") from None
                last_problem = f"HTTP {e.code} ({e.reason})"
                wait = _retry_after(e.headers.get("Retry-After")) if e.headers else None
            except sw_errors.EndPointInternalError as e:
                last_problem, wait = f"HTTP 500 ({_short(e)})", None
            except sw_errors.EndPointNotFound:
                raise EndpointError(f"The endpoint {self.url} answered 404: no SPARQL service at that URL.") from None
            except sw_errors.Unauthorized:
                raise EndpointError(f"The endpoint {self.url} answered 401: it needs credentials.") from None
            except (TimeoutError, socket.timeout):
                last_problem = f"timed out (no complete answer within {self.settings.timeout_s:g} s)"
                wait = None
            except (urllib.error.URLError, ConnectionError, HTTPException, OSError) as e:
                reason = getattr(e, "reason", e)
                if isinstance(reason, (TimeoutError, socket.timeout)):  # a connect timeout, wrapped by urllib
                    last_problem = f"timed out (no connection within {self.settings.timeout_s:g} s)"
                else:
                    last_problem = f"it is unreachable (connection failed: {reason})"
                wait = None
            if wait is not None and time.monotonic() + wait >= deadline:
                # Waiting as asked would pass the deadline: say so now rather than sleep first.
                raise EndpointError(
                    f"The endpoint {self.url} answered {last_problem} and asked to wait {wait:.0f} s before "
                    f"trying again, longer than this call's {self.settings.timeout_s:g} s limit allows.",
                    "The KG service is rate-limiting or busy; wait before calling again.",
                )
            delay = backoff if wait is None else wait
            backoff *= 2
            if attempt == self.settings.retries or time.monotonic() + delay >= deadline:
                break
            log.info("endpoint %s: %s; retrying in %.1f s", self.url, last_problem, delay)
            time.sleep(delay)
        raise EndpointError(
            f"The endpoint {self.url} did not answer: {last_problem}.",
            "The KG service is slow or unavailable; try again later or with a narrower call.",
        )

    def _request(self, query: str, timeout: float, deadline: float) -> bytes:
        wrapper = SPARQLWrapper(self.url, agent=self.user_agent)
        wrapper.setMethod(POST)
        wrapper.setReturnFormat(JSON)
        wrapper.setTimeout(max(1, round(timeout)))
        wrapper.setQuery(query)
        try:
            response = wrapper.query().response
        except sw_errors.QueryBadFormed as e:
            raise _BadQuery(_short(e)) from None
        # The socket timeout bounds each read, not the whole body: a server that keeps sending a
        # little at a time would hold the call for ever. Read in pieces and keep to the deadline.
        chunks = []
        with response:
            while chunk := response.read1(1 << 16):
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise TimeoutError("the answer did not arrive in time")
        return b"".join(chunks)

    def _solutions(self, query: str) -> ox.QuerySolutions:
        return self._parse(self._fetch(query))

    def _boolean(self, query: str) -> bool:
        return bool(self._parse(self._fetch(query)))

    def _run_any(self, query: str):
        result = self._parse(self._fetch(query))
        return bool(result) if isinstance(result, ox.QueryBoolean) else result

    def _parse(self, body: bytes):
        try:
            result = ox.parse_query_results(body, ox.QueryResultsFormat.JSON)
            if isinstance(result, ox.QuerySolutions):
                # The parser is lazy: a body cut off after its head fails only while rows are read,
                # far from here. Read it through once now, then hand out a fresh parse.
                for _ in result:
                    pass
                result = ox.parse_query_results(body, ox.QueryResultsFormat.JSON)
            return result
        except SyntaxError as e:
            raise EndpointError(f"The endpoint {self.url} sent results that are not SPARQL JSON ({e}).") from None

    # --- what differs on a remote endpoint ------------------------------------------------------
    def _name_matches(self, name: str, limit: int):
        engine = self._text_engine()
        query = None if engine == "labels" else text_search.search_query(
            engine, name, self.label_predicates, self.settings.languages, limit * 4
        )
        if query is None:
            return super()._name_matches(name, limit)
        found = {n: "exact" for n in self._nodes_labelled(name, limit * 2)}
        for solution in self._solutions(query):
            if (node := text_search.found(solution)) is not None:
                found.setdefault(node, "search")
        return text_search.METHODS[engine], [(n, m, 0) for n, m in found.items()]

    def _text_engine(self) -> str:
        if self.text_search is None:
            try:
                self._solutions(text_search.VIRTUOSO_PROBE)
                self.text_search = "virtuoso"
            except (InvalidInput, EndpointError):
                self.text_search = "labels"
            log.info("endpoint %s: find_entities uses %s", self.url, self.text_search)
        return self.text_search

    def _fuzzy_matches(self, name: str, limit: int):
        try:
            return super()._fuzzy_matches(name, limit)
        except EndpointError:  # a label scan too heavy for this endpoint: keep the exact matches
            log.info("label scan on %s failed; returning exact matches only", self.url)
            return []

    def stats(self):
        # Counting a public endpoint's triples would time out; say what we are connected to.
        from kg_mcp.backends.base import StoreStats

        return StoreStats(kind=self.kind, profile=self.profile.name, triples=None, details={"endpoint": self.url})


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


def _short(error: Exception) -> str:
    text = str(error).replace("\n", " ")
    return text[:300]
