"""What an endpoint's answer means, engine quirks included; the HTTP transport stays out of it.

Engines bend SPARQL JSON and say things in headers rather than in the results:

- Virtuoso labels blank nodes `nodeID://b10000` (and, in CONSTRUCT answers, sends them as
  `{"type": "uri", "value": "_:vb10000"}`); pyoxigraph refuses both, so they are rewritten to
  plain blank-node labels before parsing.
- Virtuoso silently stops at `ResultSetMaxRows` rows and says so only in `X-SPARQL-MaxRows`.
- Virtuoso's "anytime" answers (a query stopped at its time limit) are partial results flagged
  by `X-SQL-State` / `X-SQL-Message` headers; a query stopped outright is a 500 whose text names
  the timeout, and one it will not start is a 500 about its estimated execution time.

Results are converted to plain lists here, on the thread that parsed them: pyoxigraph's result
iterators may not be dropped on another thread (the MCP SDK runs tools in worker threads).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyoxigraph as ox

_BNODE_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
# Header names are case-insensitive; lower-cased before lookup.
_MAX_ROWS_HEADER = "x-sparql-maxrows"
_STATE_HEADER = "x-sql-state"
_MESSAGE_HEADER = "x-sql-message"
# Virtuoso error texts that mean "the query is too heavy for this endpoint": retrying will not help.
_TOO_SLOW = (
    (re.compile(r"estimated execution time \S+ \(sec\) exceeds the limit", re.IGNORECASE), "estimated"),
    (re.compile(r"\bS1T00\b|\bSR171\b|Transaction timed out", re.IGNORECASE), "stopped"),
)


class Solutions(list):
    """The rows of a SELECT as a plain list of `pyoxigraph.QuerySolution`, with its variables."""

    def __init__(self, variables, rows=()):
        super().__init__(rows)
        self.variables = list(variables)


@dataclass(frozen=True)
class Answer:
    """One parsed answer: a bool (ASK), Solutions, or a list of triples; and what the engine said about it."""

    result: bool | Solutions | list
    cut_at: int | None = None  # the engine's row cap, when the answer reached it
    partial: str | None = None  # the engine's note when it stopped early and sent what it had


def solutions_of(result) -> Solutions | list | bool:
    """Drain a pyoxigraph result into plain Python objects (on the calling thread)."""
    if isinstance(result, ox.QueryBoolean):
        return bool(result)
    if isinstance(result, ox.QuerySolutions):
        return Solutions([v.value for v in result.variables], result)
    return list(result)


def read_answer(body: bytes, headers: Mapping[str, str] | None = None) -> Answer:
    """Parse SPARQL JSON `body`; raises SyntaxError (pyoxigraph's) when it is not SPARQL JSON."""
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    body = _standard_blank_nodes(body)
    result = solutions_of(ox.parse_query_results(body, ox.QueryResultsFormat.JSON))
    cut_at = None
    cap = headers.get(_MAX_ROWS_HEADER, "").strip()
    if cap.isdigit() and not isinstance(result, bool) and len(result) >= int(cap):
        cut_at = int(cap)
    partial = None
    state = headers.get(_STATE_HEADER, "").strip()
    if state and state != "00000":
        # Virtuoso: "RC...: Returning incomplete results, query interrupted by result timeout.  Activity: ..."
        message = headers.get(_MESSAGE_HEADER, "").split("Activity:")[0].removeprefix("RC...:").strip()
        partial = f"{message} (state {state})" if message else f"state {state}"
    return Answer(result, cut_at, partial)


def too_heavy(error_text: str) -> str | None:
    """Why an engine's error text says the query is too heavy ("estimated"/"stopped"), or None."""
    for pattern, why in _TOO_SLOW:
        if pattern.search(error_text):
            return why
    return None


def _standard_blank_nodes(body: bytes) -> bytes:
    if b"nodeID://" not in body and b'"_:' not in body:
        return body
    try:
        document = json.loads(body)
        bindings = document["results"]["bindings"]
    except (ValueError, KeyError, TypeError):
        return body  # not what we can fix: let the parser say what is wrong
    for binding in bindings:
        for term in binding.values() if isinstance(binding, dict) else ():
            _fix_term(term)
    return json.dumps(document).encode()


def _fix_term(term) -> None:
    if not isinstance(term, dict) or not isinstance(term.get("value"), str):
        return
    value, kind = term["value"], term.get("type")
    if kind == "uri" and value.startswith("_:"):  # Virtuoso's CONSTRUCT answers
        kind = term["type"] = "bnode"
        value = value[2:]
    if kind == "bnode":
        label = _BNODE_UNSAFE.sub("_", value.removeprefix("nodeID://").removeprefix("_:"))
        term["value"] = label or "b"
    for part in ("subject", "predicate", "object"):  # RDF-star triple terms
        _fix_term(term.get(part))


def refuse_if_too_heavy(url: str, error_text: str) -> None:
    """An engine's "too slow" error is final: raise it at once (an EndpointError) instead of retrying."""
    from kg_mcp.errors import EndpointError

    hint = "Narrow the call: name the relations, add a LIMIT, or start from a less connected entity."
    why = too_heavy(error_text)
    if why == "estimated":
        raise EndpointError(f"The endpoint {url} refused the query: its estimated run time exceeds the endpoint's limit.", hint)
    if why == "stopped":
        raise EndpointError(f"The endpoint {url} stopped the query at its own time limit.", hint)
