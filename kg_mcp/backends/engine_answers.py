"""What an endpoint's answer means, read as it streams in, engine quirks included.

An answer is parsed while it arrives, by pyoxigraph's streaming SPARQL JSON reader over the
transport's chunks (kg_mcp.backends.http_transport): reading stops after the rows the caller
counts (`count`) or past `max_bytes`, whichever comes first, so no answer is ever held whole. Rows
past `keep` are counted, not kept. What stopped the reading is told in the Answer.

Engines bend SPARQL JSON and say things in headers rather than in the results:

- Virtuoso labels blank nodes `nodeID://b10000`, which pyoxigraph refuses: the prefix is dropped
  from a blank node's value in the bytes as they stream by.
- Virtuoso silently stops at `ResultSetMaxRows` rows and says so only in `X-SPARQL-MaxRows`.
- Virtuoso's "anytime" answers (a query stopped at its time limit) are partial results flagged
  by `X-SQL-State` / `X-SQL-Message` headers; a query stopped outright is a 500 whose text names
  the timeout, and one it will not start is a 500 about its estimated execution time.

Results are drained into plain lists here, on the thread that parsed them: pyoxigraph's result
iterators may not be dropped on another thread (the MCP SDK runs tools in worker threads).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import pyoxigraph as ox

# Header names are case-insensitive; lower-cased before lookup.
_MAX_ROWS_HEADER = "x-sparql-maxrows"
_STATE_HEADER = "x-sql-state"
_MESSAGE_HEADER = "x-sql-message"
# Virtuoso error texts that mean "the query is too heavy for this endpoint": retrying will not help.
_TOO_SLOW = (
    (re.compile(r"estimated execution time \S+ \(sec\) exceeds the limit", re.IGNORECASE), "estimated"),
    (re.compile(r"\bS1T00\b|\bSR171\b|Transaction timed out", re.IGNORECASE), "stopped"),
)
# A blank node's value as Virtuoso writes it: `"type": "bnode", "value": "nodeID://b10000"`.
_VIRTUOSO_BNODE = re.compile(rb'("type"\s{0,4}:\s{0,4}"bnode"\s{0,4},\s{0,4}"value"\s{0,4}:\s{0,4}")nodeID://')
_CARRY = 64  # bytes held back between chunks, so that the prefix is found across a boundary
# Why reading stopped before the end of an answer.
STOPPED_AT_ROWS = "rows"
STOPPED_AT_BYTES = "bytes"


class Solutions(list):
    """The rows of a SELECT as a plain list of `pyoxigraph.QuerySolution`, with its variables."""

    def __init__(self, variables, rows=()):
        super().__init__(rows)
        self.variables = list(variables)


@dataclass(frozen=True)
class Answer:
    """One parsed answer: a bool (ASK) or Solutions; what the engine said about it, and how far it was read."""

    result: bool | Solutions
    cut_at: int | None = None  # the engine's row cap, when the answer reached it
    partial: str | None = None  # the engine's note when it stopped early and sent what it had
    seen: int = 0  # rows read, kept or only counted
    stopped: str | None = None  # STOPPED_AT_ROWS or STOPPED_AT_BYTES when reading stopped before the end


class AnswerCut(Exception):
    """Reading an answer went past its byte cap."""


def solutions_of(result) -> Solutions | list | bool:
    """Drain a pyoxigraph result into plain Python objects (on the calling thread)."""
    if isinstance(result, ox.QueryBoolean):
        return bool(result)
    if isinstance(result, ox.QuerySolutions):
        return Solutions([v.value for v in result.variables], result)
    return list(result)


def read_answer(
    chunks: Iterable[bytes],
    headers: Mapping[str, str] | None = None,
    *,
    max_bytes: int,
    keep: int | None = None,
    count: int | None = None,
) -> Answer:
    """Parse a SPARQL JSON answer as its `chunks` arrive: the first `keep` rows (None: all), reading
    no further than `count` rows or `max_bytes` bytes. Raises SyntaxError (pyoxigraph's) when the
    answer is not SPARQL JSON."""
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    partial = _partial(headers)
    body = _Body(_standard_blank_nodes(chunks), max_bytes)
    results, variables, rows = None, [], []
    seen, stopped = 0, None
    try:
        results = ox.parse_query_results(body, ox.QueryResultsFormat.JSON)
        if isinstance(results, ox.QueryBoolean):
            return Answer(bool(results), partial=partial)
        variables = [v.value for v in results.variables]
        for solution in results:
            seen += 1
            if keep is None or len(rows) < keep:
                rows.append(solution)
            if count is not None and seen >= count:
                stopped = STOPPED_AT_ROWS
                break
    except AnswerCut:
        stopped = STOPPED_AT_BYTES
    finally:
        results = None  # the iterator goes on this thread, even when an error carries this frame away
    cut_at = None
    cap = headers.get(_MAX_ROWS_HEADER, "").strip()
    if cap.isdigit() and seen >= int(cap):
        cut_at = int(cap)
    return Answer(Solutions(variables, rows), cut_at, partial, seen, stopped)


def _partial(headers: Mapping[str, str]) -> str | None:
    state = headers.get(_STATE_HEADER, "").strip()
    if not state or state == "00000":
        return None
    # Virtuoso: "RC...: Returning incomplete results, query interrupted by result timeout.  Activity: ..."
    message = headers.get(_MESSAGE_HEADER, "").split("Activity:")[0].removeprefix("RC...:").strip()
    return f"{message} (state {state})" if message else f"state {state}"


class _Body(io.RawIOBase):
    """An answer's chunks as a file for pyoxigraph's reader; AnswerCut past `max_bytes`."""

    def __init__(self, chunks: Iterator[bytes], max_bytes: int):
        self._chunks = chunks
        self._pending = b""
        self.read_bytes = 0
        self.max_bytes = max_bytes

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self.read_bytes += len(chunk)
            if self.read_bytes > self.max_bytes:
                raise AnswerCut()
            self._pending = chunk
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def _standard_blank_nodes(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks with Virtuoso's `nodeID://` dropped from blank nodes' values (module docstring)."""
    carry = b""
    for chunk in chunks:
        data = _VIRTUOSO_BNODE.sub(rb"\1", carry + chunk)
        carry, data = data[-_CARRY:], data[:-_CARRY]
        if data:
            yield data
    if carry:
        yield _VIRTUOSO_BNODE.sub(rb"\1", carry)


def too_heavy(error_text: str) -> str | None:
    """Why an engine's error text says the query is too heavy ("estimated"/"stopped"), or None."""
    for pattern, why in _TOO_SLOW:
        if pattern.search(error_text):
            return why
    return None


def refuse_if_too_heavy(url: str, error_text: str) -> None:
    """An engine's "too slow" error is final: raise it at once (an EndpointError) instead of retrying."""
    from kg_mcp.errors import EndpointError

    hint = "Narrow the call: name the relations, add a LIMIT, or start from a less connected entity."
    why = too_heavy(error_text)
    if why == "estimated":
        raise EndpointError(f"The endpoint {url} refused the query: its estimated run time exceeds the endpoint's limit.", hint)
    if why == "stopped":
        raise EndpointError(f"The endpoint {url} stopped the query at its own time limit.", hint)
