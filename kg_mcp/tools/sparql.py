"""`sparql`: a read-only SPARQL query, checked and written by kg-mcp, its answer paged and checked against the KG.

The query is parsed once and written back by kg-mcp (kg_mcp.sparql): SELECT and ASK only, no
SERVICE (but an endpoint's own internal services), no FROM, no function outside a short list, and
the dataset the server reads written into it. The prefixes the tools print ids with are declared
for it (kg_mcp.sparql.prefixes). That text, never the user's, is what the store or endpoint runs;
the check runs in a worker process, stopped at a time limit (kg_mcp.sparql.parse_pool).

The answer is paged as every listing is (kg_mcp.tools.pages): the rows that fit the budget, the
total where the engine counted it while reading (kg_mcp.backends._rows.counted_rows), and a
`next_cursor` when rows remain. A page is the same checked query with ORDER BY, LIMIT and OFFSET
written by kg-mcp (CheckedQuery.page): the query's own order, then its row variables to break
ties, so every row has one place. A query without ORDER BY runs as written first; only when its
answer does not fit one page is its first page read again in that order, and only when the engine
counted the whole answer (a sort past that costs the engine more than a model can read).
IRIs the KG does not have where the query puts them are reported beside the answer with the
nearest ones it has (kg_mcp.tools.sparql_terms).
"""

from __future__ import annotations

from dataclasses import dataclass

from kg_mcp.backends import Backend
from kg_mcp.backends._rows import counted_rows
from kg_mcp.backends.base import Rows
from kg_mcp.errors import InvalidInput, KGError
from kg_mcp.ids import check_unicode
from kg_mcp.schema.examples import example_queries
from kg_mcp.schema.summary import census_of
from kg_mcp.settings import Settings
from kg_mcp.sparql import MAX_QUERY_CHARS, CheckedQuery, QueryPolicy, checked_query, policy_for
from kg_mcp.sparql.parse_pool import shared_pool
from kg_mcp.sparql.prefixes import declared, listed
from kg_mcp.tools import pages
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, cell
from kg_mcp.tools.pages import Paged
from kg_mcp.tools.sparql_terms import TermWarning, unknown_terms, warning_lines

__all__ = ["MAX_QUERY_CHARS", "SparqlResult", "check_read_only", "declared_prefixes", "query_policy", "sparql",
           "sparql_description", "examples"]

TOOL = "sparql"
# Characters kept for the text around the rows (the warnings are counted apart): the head line, and
# the line that says how to read on, with its cursor.
_FOOT_CHARS = 1200


class SparqlResult(Paged):
    variables: list[str]
    rows: list[list[TermOut | None]]
    total: int | None  # every row of the answer, where the engine counted them (None: not known)
    truncated: bool  # rows of the answer are not on this page
    boolean: bool | None = None
    # The endpoint's own row limit, when the answer reached it: more rows may exist.
    endpoint_row_limit: int | None = None
    # Set when the endpoint stopped the query early and sent only what it had found.
    partial: str | None = None
    # Set when kg-mcp stopped reading the endpoint's answer at its size cap.
    cut: str | None = None
    # IRIs of the query the KG does not have where the query puts them, with the nearest it has.
    warnings: list[TermWarning] = []


def declared_prefixes(backend: Backend) -> tuple[tuple[str, str], ...]:
    """The prefixes every query on `backend` may use undeclared: the ones its ids are printed with."""
    return declared(backend.vocab.prefixes, backend.vocab.bare_namespaces)


def query_policy(backend: Backend) -> QueryPolicy:
    """What a user's query on `backend` may name: the graphs it reads, the internal services of an
    endpoint; and the prefixes declared for it."""
    return policy_for(backend.profile.name, remote=backend.kind == "remote", graphs=backend.read_graphs,
                      prefixes=declared_prefixes(backend))


def sparql_description(backend: Backend) -> str:
    """The tool's description: what a query is best for, and the prefixes declared on this server."""
    return (
        "Run a read-only SPARQL SELECT or ASK query on this KG.\n\n"
        "Best where one query answers the whole question: class hierarchies with filters (rdfs:subClassOf+ and "
        "FILTER), shapes and their constraints, the members of RDF lists (rdf:rest*/rdf:first), counts per class "
        "or relation, joins with conditions. Names as people type them are found by find_entities, and an unknown "
        "entity's neighbourhood or a hub is read better with search and follow.\n\n"
        "Write ids as the tools print them; these prefixes are declared (a PREFIX of the query's own wins): "
        f"{listed(declared_prefixes(backend))}. The kg://examples resource holds queries written for this KG.\n\n"
        "IRIs the KG does not have where the query puts them are named beside the answer, with the nearest ones it "
        "has. Rows are paged: when more remain, pass next_cursor back as cursor with the same query."
    )


def examples(backend: Backend, settings: Settings) -> list[dict]:
    """kg://examples: queries written for this KG (kg_mcp.schema.examples), each run by this tool first
    and offered only when it answered with rows and no warning; with the size of its answer."""
    offered = []
    for example in example_queries(backend, census_of(backend, settings)):
        try:
            out = sparql(backend, settings, example.query)
        except KGError:
            continue
        data = out.data
        if data.rows and not data.warnings:
            rows = data.total if data.total is not None else f"more than {len(data.rows)}"
            offered.append({"question": example.title, "query": example.query, "rows": rows})
    return offered


def check_read_only(query: str, profile_name: str, *, remote: bool = True, graphs: tuple[str, ...] = (),
                    prefixes: tuple[tuple[str, str], ...] = ()) -> CheckedQuery:
    """The checked, written form of `query` (in this process), or the KGError that refuses it."""
    return checked_query(query, policy_for(profile_name, remote=remote, graphs=graphs, prefixes=prefixes))


def sparql(backend: Backend, settings: Settings, query: str, cursor: str = "") -> ToolOutput:
    query = query.strip()
    if not query or "\x00" in query:
        raise InvalidInput("The query is empty or contains a NUL character.", "Send a SPARQL SELECT or ASK query.")
    check_unicode(query, "query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"The query is longer than {MAX_QUERY_CHARS} characters.")
    checked = shared_pool().check(query, query_policy(backend))
    if checked.form == "AskQuery":
        if cursor:
            raise InvalidInput("An ASK query has one answer and no pages.", "Call again without cursor.")
        return _ask(backend, settings, checked)
    start = pages.position(TOOL, {"query": query}, cursor, backend, settings)
    if start.offset == 0:
        page = _first_page(backend, settings, checked)
    else:
        page = _later_page(backend, settings, checked, start.offset, _total_of(start.resume))
    return _output(backend, settings, query, page)


def _ask(backend: Backend, settings: Settings, checked: CheckedQuery) -> ToolOutput:
    result = backend.run_query(checked.text, settings.sparql_row_cap, graphs=checked.graphs)
    warnings = unknown_terms(backend, settings, checked.terms, proven=bool(result.boolean))
    text = f"sparql: ASK → {str(result.boolean).lower()}"
    if warnings:
        text += "\n" + _warnings_text(warnings, rows=0)
    data = SparqlResult(variables=[], rows=[], total=None, truncated=False, boolean=result.boolean, warnings=warnings)
    return ToolOutput(text, data)


@dataclass
class _Page:
    """Rows of one page, and what is known of the whole answer."""

    result: Rows
    offset: int
    total: int | None  # the whole answer's rows, where known
    ordered: bool  # the rows are in the page order (CheckedQuery.page): a next page may follow
    rendered: _Rendered | None = None
    warnings: list[TermWarning] | None = None


def _first_page(backend: Backend, settings: Settings, checked: CheckedQuery) -> _Page:
    cap = settings.sparql_row_cap
    # The query's own order, ties broken, costs it nothing more; else it runs as written.
    text = checked.page(0, None) if checked.ordered else checked.text
    result = backend.run_query(text, cap, graphs=checked.graphs)
    page = _Page(result, 0, result.total, ordered=checked.ordered)
    page.warnings = unknown_terms(backend, settings, checked.terms, proven=bool(result.rows))
    page.rendered = _render(backend, settings, result, page.warnings)
    remains = result.total is None or result.total > page.rendered.shown
    if remains and not page.ordered and result.total is not None and not result.partial:
        # Cut, and counted whole: its first page again, in the order every later page keeps.
        ordered = backend.run_query(checked.page(0, cap), cap, graphs=checked.graphs)
        page.result, page.ordered = ordered, True
        page.rendered = _render(backend, settings, ordered, page.warnings)
    return page


def _later_page(backend: Backend, settings: Settings, checked: CheckedQuery, offset: int, total: int | None) -> _Page:
    cap = settings.sparql_row_cap
    # One row past the page says whether another follows when the total is not known.
    result = backend.run_query(checked.page(offset, cap + 1), cap + 1, graphs=checked.graphs)
    page = _Page(result, offset, total, ordered=True, warnings=[])
    page.rendered = _render(backend, settings, result, [], most=cap)
    return page


@dataclass
class _Rendered:
    header: list[str]
    lines: list[str]
    rows: list[list[dict | None]]
    shown: int


def _render(backend: Backend, settings: Settings, result: Rows, warnings: list[TermWarning], *, most: int | None = None) -> _Rendered:
    """The rows as table lines and JSON, and how many of them fit the budget with the rest of the text."""
    namer = Namer(backend, settings, (v for row in result.rows[:most] for v in row if v is not None))
    header = ["| " + " | ".join(result.variables) + " |", "|" + "---|" * len(result.variables)]
    lines, data = [], []
    for row in result.rows[:most]:
        lines.append("| " + " | ".join(cell(namer.value_text(v), settings) if v is not None else "" for v in row) + " |")
        data.append([namer.term(v) if v is not None else None for v in row])
    used = sum(len(line) + 1 for line in header) + len(_warnings_text(warnings, rows=len(lines))) + _FOOT_CHARS
    json_used = sum(len(w.model_dump_json()) for w in warnings) + _FOOT_CHARS
    shown = pages.rows_that_fit(lines, data, settings.max_output_chars, text_used=used, json_used=json_used)
    return _Rendered(header, lines, data, shown)


def _output(backend: Backend, settings: Settings, query: str, page: _Page) -> ToolOutput:
    rendered, result = page.rendered, page.result
    assert rendered is not None
    shown = rendered.shown
    end = page.offset + shown
    if page.total is not None:
        remains = page.total > end
    else:  # a first page read to the cap, or a later one with its row past the page
        remains = result.total is None or len(result.rows) > shown
    cursor = None
    if remains and page.ordered and not result.partial and shown:
        resume = "" if page.total is None else str(page.total)
        cursor = pages.next_cursor(TOOL, {"query": query}, end, backend, settings, resume=resume)
    warnings = page.warnings or []
    lines = [f"sparql: {_size_text(result, page, shown, cursor is not None, counted_rows(settings.sparql_row_cap))}"]
    if warnings and not result.rows:  # zero rows: first, why
        lines.append(_warnings_text(warnings, rows=0))
    lines += rendered.header + rendered.lines[:shown]
    if warnings and result.rows:
        lines.append(_warnings_text(warnings, rows=len(result.rows)))
    if cursor:
        lines.append(pages.more_line(page.offset, shown, page.total, cursor, exact=page.total is not None))
    elif page.offset and shown:
        lines.append(f"Rows {page.offset + 1:,}-{end:,} shown: the last page.")
    data = SparqlResult(
        variables=result.variables,
        rows=rendered.rows[:shown],
        total=page.total,
        truncated=remains,
        endpoint_row_limit=result.cut_at,
        partial=result.partial,
        cut=result.cut,
        warnings=warnings,
        offset=page.offset,
        next_cursor=cursor,
    )
    # A page keeps at least one row: one wider than the budget is cut here, as every output is.
    return ToolOutput(capped("\n".join(lines), settings, "Select fewer variables, or shorter values.", read_whole=False), data)


def _size_text(result: Rows, page: _Page, shown: int, paged: bool, counted: int) -> str:
    """The head line's account of the answer's size (`counted`: how far the engine counts rows)."""
    if result.partial:
        return (
            f"PARTIAL answer, the endpoint stopped the query at its time limit ({result.partial}); "
            f"{_rows(len(result.rows))} or more were found, the first {shown} shown"
        )
    if page.offset:
        if not shown:
            return f"no rows past row {page.offset:,}" + (f" of {page.total:,}" if page.total is not None else "")
        return _rows(page.total) if page.total is not None else "rows of a longer answer"
    if result.cut:
        how = "page on below" if paged else "select fewer or shorter values, or page with ORDER BY and LIMIT/OFFSET"
        return f"CUT answer: {result.cut}; showing the first {shown}; {how}"
    if result.cut_at is not None and not paged:
        return (
            f"at least {result.cut_at:,} rows, possibly cut: the endpoint stops every answer at "
            f"{result.cut_at:,} rows (its own limit); showing the first {shown}: add ORDER BY to page "
            "through it, or narrow the pattern"
        )
    if page.total is not None:
        return _rows(page.total)
    size = f"more than {counted:,} rows" if result.cut_at is None else f"at least {result.cut_at:,} rows"
    if paged:
        return size
    return (
        f"{size}, showing the first {shown} (cut): too many to page through in the engine's own order; "
        "add ORDER BY (pages then follow) or LIMIT, or narrow the pattern"
    )


def _rows(n: int) -> str:
    return f"{n:,} row{'' if n == 1 else 's'}"


def _warnings_text(warnings: list[TermWarning], *, rows: int) -> str:
    if not warnings:
        return ""
    if rows:
        head = ("Note: the query names IRIs this KG does not have where the query puts them (the parts that "
                "hold them matched nothing):")
    else:
        head = "The query names IRIs this KG does not have where the query puts them:"
    return "\n".join([head, *warning_lines(warnings)])


def _total_of(resume: str | None) -> int | None:
    return int(resume) if resume and resume.isdigit() else None
