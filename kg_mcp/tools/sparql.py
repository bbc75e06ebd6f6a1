"""`sparql`: a read-only SPARQL query, off unless the server is started with it.

The query is parsed once and written back by kg-mcp (kg_mcp.sparql): SELECT and ASK only, no
SERVICE (but an endpoint's own internal services), no FROM, no function outside a short list, and
the dataset the server reads written into it. That text, never the user's, is what the store or
endpoint runs. The check runs in a worker process, stopped at a time limit (kg_mcp.sparql.parse_pool).
Results are capped at a row count and the total is told; an endpoint's answer is read no further
than settings.sparql_answer_mb, and a cut answer says so.
"""

from __future__ import annotations

from pydantic import BaseModel

from kg_mcp.backends import Backend
from kg_mcp.errors import InvalidInput
from kg_mcp.ids import check_unicode
from kg_mcp.settings import Settings
from kg_mcp.sparql import MAX_QUERY_CHARS, CheckedQuery, QueryPolicy, checked_query, policy_for
from kg_mcp.sparql.parse_pool import shared_pool
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, plural, table

__all__ = ["MAX_QUERY_CHARS", "SparqlResult", "check_read_only", "query_policy", "sparql"]


class SparqlResult(BaseModel):
    variables: list[str]
    rows: list[list[TermOut | None]]
    total: int | None
    truncated: bool
    boolean: bool | None = None
    # The endpoint's own row limit, when the answer reached it: more rows may exist.
    endpoint_row_limit: int | None = None
    # Set when the endpoint stopped the query early and sent only what it had found.
    partial: str | None = None
    # Set when kg-mcp stopped reading the endpoint's answer at its size cap.
    cut: str | None = None


def query_policy(backend: Backend) -> QueryPolicy:
    """What a user's query on `backend` may name: the graphs it reads, the internal services of an endpoint."""
    return policy_for(backend.profile.name, remote=backend.kind == "remote", graphs=backend.read_graphs)


def check_read_only(query: str, profile_name: str, *, remote: bool = True, graphs: tuple[str, ...] = ()) -> CheckedQuery:
    """The checked, written form of `query` (in this process), or the KGError that refuses it."""
    return checked_query(query, policy_for(profile_name, remote=remote, graphs=graphs))


def sparql(backend: Backend, settings: Settings, query: str) -> ToolOutput:
    query = query.strip()
    if not query or "\x00" in query:
        raise InvalidInput("The query is empty or contains a NUL character.", "Send a SPARQL SELECT or ASK query.")
    check_unicode(query, "query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"The query is longer than {MAX_QUERY_CHARS} characters.")
    checked = shared_pool().check(query, query_policy(backend))
    result = backend.run_query(checked.text, settings.sparql_row_cap, graphs=checked.graphs)
    if result.boolean is not None:
        data = SparqlResult(variables=[], rows=[], total=None, truncated=False, boolean=result.boolean)
        return ToolOutput(f"sparql: ASK → {str(result.boolean).lower()}", data)
    namer = Namer(backend, settings)
    rows = [[namer.out(v) if v is not None else None for v in row] for row in result.rows]
    truncated = result.total is None or result.total > len(rows)
    head = f"sparql: {_size_text(result)}"
    if truncated:
        head += f", showing the first {len(rows)} (cut). Add LIMIT/OFFSET or narrow the pattern to see others."
    md = table(result.variables, ([namer.value_text(v) if v is not None else "" for v in row] for row in result.rows), settings)
    data = SparqlResult(
        variables=result.variables,
        rows=rows,
        total=result.total,
        truncated=truncated,
        endpoint_row_limit=result.cut_at,
        partial=result.partial,
        cut=result.cut,
    )
    return ToolOutput(capped(head + "\n" + md, settings, "Add a LIMIT or select fewer variables."), data)


def _size_text(result) -> str:
    if result.partial:
        return (
            f"PARTIAL answer, the endpoint stopped the query at its time limit ({result.partial}); "
            f"{plural(len(result.rows), 'row')} or more were found"
        )
    if result.cut:
        return f"CUT answer: {result.cut}; select fewer or shorter values, or page with LIMIT/OFFSET"
    if result.cut_at is not None:
        return (
            f"at least {result.cut_at:,} rows, possibly cut: the endpoint stops every answer at "
            f"{result.cut_at:,} rows (its own limit); page with LIMIT/OFFSET below that"
        )
    return plural(result.total, "row") if result.total is not None else "very many rows"
