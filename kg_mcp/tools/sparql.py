"""`sparql`: a read-only SPARQL query, off unless the server is started with it.

The query is parsed (rdflib's SPARQL grammar) before it is sent: updates, LOAD/CLEAR/DROP,
dataset clauses and SERVICE calls to other hosts are refused on the parse tree, never by
searching the text. Results are capped at a row count and the total is told.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from kg_mcp.backends import Backend
from kg_mcp.errors import InvalidInput, QueryRefused
from kg_mcp.ids import check_unicode
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, plural, table

MAX_QUERY_CHARS = 20_000
_PROLOGUE_DECL = re.compile(r"\b(?:PREFIX\s+[^\s:]*:|BASE)\s*<[^<>\s]*>", re.IGNORECASE)
# Services that run inside the endpoint itself and fetch nothing (Wikidata's label service).
INTERNAL_SERVICES = {"wikidata": {"http://wikiba.se/ontology#label"}}


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


def check_read_only(query: str, profile_name: str, *, remote: bool = True) -> str:
    """The query form ('SelectQuery' or 'AskQuery') of a query that is safe to run; refuses the rest.

    `remote`: the query goes to an endpoint, whose own internal services (Wikidata's label
    service) may run; a local store would make an HTTP request for them instead.
    """
    # rdflib misreads a one-line query whose PREFIX IRI holds '#' (wikibase:); a line break after
    # each declaration avoids that. A wrong split could only make the parse fail, never pass.
    query = _PROLOGUE_DECL.sub(lambda m: m.group(0) + "\n", query)
    try:
        parsed = _parse(query)
    except RecursionError:  # the grammar recurses once per nesting level, and Python's stack is finite
        raise InvalidInput("The query is nested too deeply to check.",
                           "Use fewer nested brackets or groups (a few dozen levels at most).") from None
    prologue, body = parsed[0], parsed[1]
    if body.name not in ("SelectQuery", "AskQuery"):
        raise QueryRefused(
            f"{body.name.removesuffix('Query').upper()} queries are not supported.",
            "Rewrite it as a SELECT, e.g. SELECT ?s ?p ?o WHERE { ... }.",
        )
    if "datasetClause" in body:  # CompValue.get returns the key itself when absent
        raise QueryRefused("FROM / FROM NAMED clauses are not allowed.", "Query the default graph without FROM.")
    prefixes = {_field(d, "prefix"): str(d["iri"]) for d in _walk(prologue) if d.name == "PrefixDecl"}
    allowed = INTERNAL_SERVICES.get(profile_name, set()) if remote else set()
    for service in (n for n in _walk(body) if n.name == "ServiceGraphPattern"):
        target = _iri(service["term"], prefixes)
        if target not in allowed:
            raise QueryRefused(
                f"SERVICE {target or 'with a variable'} is not allowed: queries may not call other services.",
                "Remove the SERVICE clause; query this KG only.",
            )
    return body.name


def _walk(node):
    from rdflib.plugins.sparql.parserutils import CompValue

    if isinstance(node, CompValue):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, (list, tuple)) or type(node).__name__ == "ParseResults":
        for value in node:
            yield from _walk(value)


def _iri(term, prefixes: dict[str, str]) -> str | None:
    from rdflib import URIRef
    from rdflib.plugins.sparql.parserutils import CompValue

    if isinstance(term, URIRef):
        return str(term)
    if isinstance(term, CompValue) and term.name == "pname":
        namespace = prefixes.get(_field(term, "prefix"))
        return None if namespace is None else namespace + _field(term, "localname")
    return None  # a variable


def _field(node, key: str) -> str:
    """A parse-tree field, '' when absent (CompValue.get returns the key's own name then)."""
    return str(node[key] or "") if key in node else ""


def sparql(backend: Backend, settings: Settings, query: str) -> ToolOutput:
    query = query.strip()
    if not query or "\x00" in query:
        raise InvalidInput("The query is empty or contains a NUL character.", "Send a SPARQL SELECT or ASK query.")
    check_unicode(query, "query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"The query is longer than {MAX_QUERY_CHARS} characters.")
    check_read_only(query, backend.profile.name, remote=backend.kind == "remote")
    result = backend.run_query(query, settings.sparql_row_cap)
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
    )
    return ToolOutput(capped(head + "\n" + md, settings, "Add a LIMIT or select fewer variables."), data)


def _size_text(result) -> str:
    if result.partial:
        return (
            f"PARTIAL answer, the endpoint stopped the query at its time limit ({result.partial}); "
            f"{plural(len(result.rows), 'row')} or more were found"
        )
    if result.cut_at is not None:
        return (
            f"at least {result.cut_at:,} rows, possibly cut: the endpoint stops every answer at "
            f"{result.cut_at:,} rows (its own limit); page with LIMIT/OFFSET below that"
        )
    return plural(result.total, "row") if result.total is not None else "very many rows"


def _parse(query: str):
    """rdflib's parse of a read query; a tool error for bad syntax, a refusal for an update."""
    from pyparsing import ParseException
    from rdflib.plugins.sparql.parser import parseQuery, parseUpdate

    try:
        return parseQuery(query)
    except ValueError as error:  # rdflib decodes \U escapes first, and refuses code points past U+10FFFF
        raise InvalidInput(f"The query does not parse: {error}", "Fix the SPARQL syntax.") from None
    except ParseException as error:
        try:
            parseUpdate(query)
        except ParseException:
            raise InvalidInput(f"The query does not parse: {error}", "Fix the SPARQL syntax.") from None
        raise QueryRefused(
            "This is an update (INSERT, DELETE, LOAD, CLEAR, DROP, CREATE...); the KG is read-only.",
            "Only SELECT and ASK queries can run.",
        ) from None
