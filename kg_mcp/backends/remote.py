"""Any SPARQL endpoint over HTTP, read-only.

Queries travel through kg_mcp.backends.http_transport (kept-alive connections, one deadline a
call, retries with backoff); results are parsed here. Wikimedia refuses generic user agents, so
every request names kg-mcp and a contact.
"""

from __future__ import annotations

import logging

import pyoxigraph as ox

from kg_mcp import __version__
from kg_mcp.backends.http_transport import SparqlHttp
from kg_mcp.backends.sparql_backend import SparqlBackend
from kg_mcp.errors import EndpointError

log = logging.getLogger(__name__)


class RemoteBackend(SparqlBackend):
    kind = "remote"

    def __init__(self, url: str, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.url = url
        self.user_agent = f"kg-mcp/{__version__} ({self.settings.contact}) httpx2"
        self.http = SparqlHttp(url, user_agent=self.user_agent, timeout_s=self.settings.timeout_s, retries=self.settings.retries)
        # A full scan of labels would time out on a large public endpoint; Wikidata has a search API.
        self.label_scan = self.profile.name != "wikidata"
        self.use_entity_search = self.profile.entity_search == "mwapi" and "query.wikidata.org" in url

    # --- transport (kg_mcp.backends.http_transport) ----------------------------------------------
    def _fetch(self, query: str) -> bytes:
        return self.http.fetch(query)

    def close(self) -> None:
        self.http.close()

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
    def _fuzzy_matches(self, name: str, limit: int):
        if self.use_entity_search:
            from kg_mcp.backends import _queries as q

            language = self.settings.languages[0] if self.settings.languages else "en"
            return [(s["x"], "search") for s in self._solutions(q.wikidata_entity_search(name, language, limit))]
        try:
            return super()._fuzzy_matches(name, limit)
        except EndpointError:  # a label scan too heavy for this endpoint: keep the exact matches
            log.info("label scan on %s failed; returning exact matches only", self.url)
            return []

    def stats(self):
        # Counting a public endpoint's triples would time out; say what we are connected to.
        from kg_mcp.backends.base import StoreStats

        return StoreStats(kind=self.kind, profile=self.profile.name, triples=None, details={"endpoint": self.url})
