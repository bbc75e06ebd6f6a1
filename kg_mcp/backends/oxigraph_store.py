"""A local Oxigraph store on disk (or in memory, for the demo KG and tests)."""

from __future__ import annotations

import pyoxigraph as ox

from kg_mcp.backends.sparql_backend import SparqlBackend
from kg_mcp.errors import EndpointError, InvalidInput


class OxigraphBackend(SparqlBackend):
    kind = "oxigraph"

    def __init__(self, store: ox.Store, *args, location: str = "memory", **kwargs):
        super().__init__(*args, **kwargs)
        self.store = store
        self.location = location

    def _solutions(self, query: str) -> ox.QuerySolutions:
        try:
            return self.store.query(query)
        except OSError as e:
            raise EndpointError(f"The store at {self.location} could not be read: {e}") from e

    def _boolean(self, query: str) -> bool:
        return bool(self._solutions(query))

    def _run_any(self, query: str):
        try:
            result = self.store.query(query)
        except SyntaxError as e:
            raise InvalidInput(f"The query does not parse: {e}", "Fix the SPARQL syntax and try again.") from None
        except OSError as e:
            raise EndpointError(f"The store at {self.location} could not be read: {e}") from e
        return bool(result) if isinstance(result, ox.QueryBoolean) else result

    def stats(self):
        stats = super().stats()
        stats.details["location"] = self.location
        return stats

    def close(self) -> None:
        self.store = None  # RocksDB closes when the last reference goes
