"""A user's query, parsed once and written back by kg-mcp: the only text that may run.

`checked_query` reads the query into tokens (kg_mcp.sparql.lexing: a bound on its size, the
papers' Virtuoso dialect), parses them once with rdflib's SPARQL grammar, and writes kg-mcp's own
text from the parse tree (kg_mcp.sparql.writer), checking every IRI, service, function and graph
on the way against a policy (kg_mcp.sparql.policy). The user's text is never sent anywhere.

rdflib's parser (pyparsing) keeps state between calls and is not thread-safe, and the worst
queries within the token cap take it about a second. Servers therefore check queries in worker
processes (kg_mcp.sparql.parse_pool), which can be stopped at a time limit; in this process the
parse runs under a lock, for scripts and tests.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

from kg_mcp.errors import InvalidInput
from kg_mcp.sparql.lexing import lex
from kg_mcp.sparql.policy import QueryPolicy, refused_dataset, refused_service, refused_update

MAX_QUERY_CHARS = 20_000
# rdflib's parser costs about 0.5 ms of CPU per token on the worst shapes measured (`{ } { } ...`,
# `?a||?a||...`, CONCAT of many strings) and more past that (a 20 KB `1+1+...+1`: 8.6 s). At this
# cap the worst parse measured took 0.5-1.2 s; real queries (a VALUES list of 300 IRIs included) fit.
MAX_QUERY_TOKENS = 1_000

_parsing = threading.Lock()


@dataclass(frozen=True)
class CheckedQuery:
    """A query as kg-mcp wrote it (kg_mcp.sparql.writer.Written has the parts), and the dataset it
    was written for. `text` and the pages of `page` are all that may be run."""

    text: str  # written by kg-mcp from the checked parse
    form: str  # 'SelectQuery' or 'AskQuery'
    graphs: tuple[str, ...] = ()  # the dataset written into `text` (empty: the store as it answers)
    head: str = ""
    order: str = ""
    limit: int | None = None
    offset: int | None = None
    tail: str = ""
    keys: tuple[str, ...] = ()
    terms: tuple[tuple[str, str, bool], ...] = ()  # (position, IRI, certain): see Written

    def fields(self) -> tuple:
        """The fields in order, as plain data (what a checking process sends back)."""
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))

    @property
    def ordered(self) -> bool:
        """Whether the query orders its own rows (then `page` only adds keys to break ties)."""
        return bool(self.order)

    def page(self, start: int, size: int | None) -> str:
        """The text of the rows `start` to `start + size` (None: all from `start`) in one fixed order:
        the query's own ORDER BY, then its row variables (`keys`) to break ties, and its own LIMIT
        and OFFSET kept. Made of the written parts and integers only: the text that runs for a page
        is the checked text with its solution modifiers written by kg-mcp.

        >>> q = CheckedQuery("SELECT ?s WHERE { ?s ?p ?o . } LIMIT 50", "SelectQuery",
        ...                  head="SELECT ?s WHERE { ?s ?p ?o . }", limit=50, keys=("?s",))
        >>> q.page(40, 20)
        'SELECT ?s WHERE { ?s ?p ?o . } ORDER BY ?s LIMIT 10 OFFSET 40'
        """
        if self.form != "SelectQuery":
            raise ValueError("only a SELECT has pages")
        order = self.order.split(" ") if self.order else []
        # Every row variable after the query's own order: one inside an expression (STRLEN(?name))
        # does not break ties on its own.
        order += list(self.keys)
        end = self.limit if size is None else min(self.limit, start + size) if self.limit is not None else start + size
        parts = [self.head]
        if order:
            parts += ["ORDER BY", " ".join(order)]
        if end is not None:
            parts.append(f"LIMIT {max(0, end - start)}")
        if (skip := (self.offset or 0) + start):
            parts.append(f"OFFSET {skip}")
        if self.tail:
            parts.append(self.tail)
        return " ".join(parts)


def checked_query(query: str, policy: QueryPolicy) -> CheckedQuery:
    """The text kg-mcp writes for `query` under `policy`, and its form; a KGError for the rest."""
    lexed = lex(query, max_tokens=MAX_QUERY_TOKENS)
    # Refused by name before the parse, which they would only make longer (rdflib searches the whole
    # text again for each SERVICE). The parse tree is still checked: these only refuse sooner.
    if lexed.update_word():
        raise refused_update()
    words = {t.text.upper() for t in lexed.tokens if t.kind == "word"}
    if "FROM" in words:
        raise refused_dataset()
    if "SERVICE" in words and not policy.services:
        raise refused_service("")
    tree = parse(lexed.lines())
    from kg_mcp.sparql.writer import written  # rdflib's, as parse(): imported where queries are checked, not at start

    try:
        out = written(tree, policy)
    except RecursionError:
        raise _too_deep() from None
    return CheckedQuery(out.text, out.form, policy.graphs, out.head, out.order, out.limit, out.offset, out.tail,
                        out.keys, out.terms)


def parse(text: str):
    """rdflib's parse tree of a query's tokens (kg_mcp.sparql.lexing); a tool error for bad syntax."""
    from pyparsing import ParseException
    from rdflib.plugins.sparql.parser import parseQuery

    try:
        with _parsing:
            return parseQuery(text)
    except (ValueError, ParseException) as error:
        at = getattr(error, "loc", None)  # where in the text (a token a line) the parse stopped
        near = " ".join(text[at : at + 40].split()) if isinstance(at, int) else ""
        where = f" near {near!r}" if near else ""
        raise InvalidInput(f"The query does not parse{where}.", "Fix the SPARQL syntax.") from None
    except RecursionError:  # the grammar recurses once per nesting level, and Python's stack is finite
        raise _too_deep() from None


def _too_deep() -> InvalidInput:
    return InvalidInput(
        "The query is nested too deeply to check.", "Use fewer nested brackets or groups (a few dozen levels at most)."
    )
