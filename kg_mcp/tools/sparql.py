"""`sparql`: a read-only SPARQL query, off unless the server is started with it.

The query is first written in its canonical form (kg_mcp.tools._sparql_text): comments dropped,
whitespace, strings and escapes normalised, so that every parser reads the same tokens. That text
is checked on its tokens (updates, LOAD/CLEAR/DROP, dataset clauses, SERVICE calls to other hosts
and engine built-ins are refused; in the canonical text a keyword is a token to every parser), then
parsed by rdflib for its syntax and form, and that same text is what the store or endpoint runs.
Results are capped at a row count and the total is told.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from kg_mcp.backends import Backend
from kg_mcp.errors import InvalidInput, QueryRefused
from kg_mcp.ids import check_unicode
from kg_mcp.settings import Settings
from kg_mcp.tools._sparql_text import CanonicalQuery, canonical_query
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, plural, table

MAX_QUERY_CHARS = 20_000
# rdflib's parser costs about 0.5 ms of CPU per token on the worst shapes measured (`{ } { } ...`,
# `?a||?a||...`, CONCAT of many strings) and more past that (a 20 KB `1+1+...+1`: 8.6 s). At this
# cap the worst check measured took 0.5 s; real queries (a VALUES list of 300 IRIs included) fit.
MAX_QUERY_TOKENS = 1_000
# Keywords that only an update has: refused on the tokens, before any parse.
_UPDATE_WORDS = {
    "INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH", "USING"
}  # fmt: skip
# Virtuoso runs its SQL built-ins from SPARQL as bif:NAME(...) and its stored procedures as
# sql:NAME(...); some reach other machines (bif:http_get fetches any URL on a stock install). The
# text-search predicate bif:contains is the one kept: it reads only the endpoint's own index.
_ENGINE_FUNCTION_NAMESPACES = ("bif:", "sql:", "http://www.openlinksw.com/schemas/bif#")
_ENGINE_FUNCTIONS_ALLOWED = {"bif:contains"}
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


@dataclass(frozen=True)
class CheckedQuery:
    text: str  # the canonical text: what was checked, and all that may be run
    form: str  # 'SelectQuery' or 'AskQuery'


def check_read_only(query: str, profile_name: str, *, remote: bool = True) -> str:
    """The query form ('SelectQuery' or 'AskQuery') of a query that is safe to run; refuses the rest."""
    return checked_query(query, profile_name, remote=remote).form


def checked_query(query: str, profile_name: str, *, remote: bool = True) -> CheckedQuery:
    """The canonical text of a query that is safe to run, and its form; refuses the rest.

    `remote`: the query goes to an endpoint, whose own internal services (Wikidata's label
    service) may run; a local store would make an HTTP request for them instead.
    """
    canonical = canonical_query(query, max_tokens=MAX_QUERY_TOKENS)
    allowed = INTERNAL_SERVICES.get(profile_name, set()) if remote else set()
    _check_tokens(canonical, allowed)
    try:
        parsed = _parse(canonical.lines())
    except RecursionError:  # the grammar recurses once per nesting level, and Python's stack is finite
        raise InvalidInput("The query is nested too deeply to check.",
                           "Use fewer nested brackets or groups (a few dozen levels at most).") from None
    body = parsed[1]
    if body.name not in ("SelectQuery", "AskQuery"):
        raise QueryRefused(
            f"{body.name.removesuffix('Query').upper()} queries are not supported.",
            "Rewrite it as a SELECT, e.g. SELECT ?s ?p ?o WHERE { ... }.",
        )
    return CheckedQuery(canonical.text, body.name)


def _check_tokens(canonical: CanonicalQuery, allowed_services: set[str]) -> None:
    """Refuse updates, FROM and SERVICE calls on the canonical tokens themselves, whatever rdflib
    makes of them: in the canonical text a keyword is a keyword to every parser."""
    tokens, prefixes = canonical.tokens, canonical.prefixes
    for i, token in enumerate(tokens):
        if token.kind in ("iri", "pname"):
            _check_engine_function(token, prefixes)
            continue
        if token.kind != "word":
            continue
        word = token.text.upper()
        if word in _UPDATE_WORDS:
            raise _update_refused()
        elif word == "FROM":
            raise _from_refused()
        elif word == "SERVICE":
            rest = tokens[i + 1 : i + 3]
            target = next((t for t in rest if not (t.kind == "word" and t.text.upper() == "SILENT")), None)
            iri = None
            if target is not None and target.kind == "iri":
                iri = target.text[1:-1]
            elif target is not None and target.kind == "pname" and target.text.partition(":")[0] in prefixes:
                prefix, _, local = target.text.partition(":")
                iri = prefixes[prefix] + local
            if iri not in allowed_services:
                raise _service_refused(iri)


def _check_engine_function(token, prefixes: dict[str, str]) -> None:
    """Refuse Virtuoso's built-in functions and procedures, written as IRIs or prefixed names
    (declared or not: Virtuoso knows bif: and sql: without a PREFIX)."""
    if token.kind == "iri":
        name = token.text[1:-1]
    else:
        prefix, _, local = token.text.partition(":")
        name = prefixes.get(prefix, prefix + ":") + local
    if name.lower().startswith(_ENGINE_FUNCTION_NAMESPACES) and name.lower() not in _ENGINE_FUNCTIONS_ALLOWED:
        raise QueryRefused(
            f"{name[:60]} is one of the engine's own built-in functions, which are not allowed: some "
            "of them reach other machines.",
            "Use SPARQL's standard functions (STR, REGEX, CONTAINS, ...) instead.",
        )


def _update_refused() -> QueryRefused:
    return QueryRefused(
        "This is an update (INSERT, DELETE, LOAD, CLEAR, DROP, CREATE...); the KG is read-only.",
        "Only SELECT and ASK queries can run.",
    )


def _from_refused() -> QueryRefused:
    # On an endpoint the server chooses the graphs every query reads (kg_mcp.backends.named_graphs),
    # and Virtuoso would merge a query's own FROM with them.
    return QueryRefused(
        "FROM / FROM NAMED clauses are not allowed.",
        "Query without FROM: every query already reads the KG's graphs.",
    )


def _service_refused(target: str | None) -> QueryRefused:
    return QueryRefused(
        f"SERVICE {target[:100] if target else 'with a variable'} is not allowed: "
        "queries may not call other services.",
        "Remove the SERVICE clause; query this KG only.",
    )


def sparql(backend: Backend, settings: Settings, query: str) -> ToolOutput:
    query = query.strip()
    if not query or "\x00" in query:
        raise InvalidInput("The query is empty or contains a NUL character.", "Send a SPARQL SELECT or ASK query.")
    check_unicode(query, "query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"The query is longer than {MAX_QUERY_CHARS} characters.")
    checked = checked_query(query, backend.profile.name, remote=backend.kind == "remote")
    result = backend.run_query(checked.text, settings.sparql_row_cap)
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
    """rdflib's parse of a read query (updates were refused on the tokens); a tool error for bad syntax."""
    from pyparsing import ParseException
    from rdflib.plugins.sparql.parser import parseQuery

    try:
        return parseQuery(query)
    except (ValueError, ParseException) as error:
        at = getattr(error, "loc", None)  # where in the text (a line per token) the parse stopped
        near = " ".join(query[at : at + 40].split()) if isinstance(at, int) else ""
        where = f" near {near!r}" if near else ""
        raise InvalidInput(f"The query does not parse{where}.", "Fix the SPARQL syntax.") from None
