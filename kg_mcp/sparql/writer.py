"""kg-mcp's own SPARQL text, written from rdflib's parse tree of a user's query and checked as written.

rdflib's parse tree (`rdflib.plugins.sparql.parser.parseQuery`) mirrors the grammar: one node per
production, named as the grammar names it. The writer knows a short list of them, the SELECT and
ASK forms and what they hold, and writes each back in one fixed spelling:

- every IRI absolute, between < >, resolved here from the query's prefixes and BASE (no PREFIX
  and no BASE is sent), and checked by the policy (kg_mcp.sparql.policy) as written;
- every keyword and symbol apart from its neighbours by a space, on one line, with no comment,
  but for the bracket that opens a call, glued to the call's name (`CONCAT(`): Oxigraph 0.5 reads
  `CONCAT (`, `COALESCE (` and `BNODE ( )` as errors;
- strings in double quotes with their quotes, backslashes and line ends escaped by us; language
  tags, numbers and variables written by us from their values;
- every expression that has an operator in brackets, so that no engine's precedence rules matter.

A node it does not know, a SERVICE, FROM or function call outside the policy, is refused with a
tool error that says what to write instead. The dataset is written in too: with graphs to keep to,
the query gets FROM and FROM NAMED for each, a `GRAPH <iri>` outside them is refused and a
`GRAPH ?g` is joined with VALUES of them. So what runs is what was checked, on every engine.

On the way the writer notes what kg-mcp needs besides the text (`Written`): the IRIs of the triple
patterns by position (predicate, class, node), for the check against the KG's own terms, and the
top-level solution modifiers apart from the rest, so that a page of the answer is the same text
with its ORDER BY, LIMIT and OFFSET written by kg-mcp (kg_mcp.sparql.checked.CheckedQuery.page).
"""

from __future__ import annotations

import re
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass

from pyparsing import ParseResults
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import BNode, Literal, URIRef, Variable

from kg_mcp.errors import InvalidInput
from kg_mcp.sparql._expressions import ExpressionWriter, field, refuse, string_literal
from kg_mcp.sparql.policy import CLASS, NODE, PREDICATE, XSD, QueryPolicy, refused_dataset

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_IRIREF = re.compile(r'[^<>"{}|^`\\\x00-\x20]*')
_LOCAL_ESCAPE = re.compile(r"\\(.)")
_LANGTAG = re.compile(r"[a-zA-Z]+(?:-[a-zA-Z0-9]+)*")
_VARNAME = re.compile(r"[\w\u00b7\u0300-\u036f\u203f-\u2040]+")
_BNODE_LABEL = re.compile(r"\w(?:[\w\-.]*[\w\-])?")
# Numbers written bare when their lexical form is the grammar's own for their type; else typed.
_NUMBERS = {
    XSD + "integer": re.compile(r"[+-]?[0-9]+"),
    XSD + "decimal": re.compile(r"[+-]?[0-9]*\.[0-9]+"),
    XSD + "double": re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.?[0-9]+)[eE][+-]?[0-9]+"),
}
_BOOLEAN = XSD + "boolean"
# Engines' virtual services and Virtuoso's procedures are named by these prefixes without a PREFIX:
# read as Virtuoso reads them, so that the policy sees them (other undeclared prefixes are an error).
_ENGINE_PREFIXES = ("bif", "sql")

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

@dataclass(frozen=True)
class Written:
    """A query as kg-mcp writes it: `text`, and the same text in parts, for pages.

    `text` is `head`, then ORDER BY `order` (when it has one), then its LIMIT and OFFSET, then
    `tail` (a VALUES block after the query). `keys`: the variables a page orders by after `order`,
    so that every row has one place (the projected ones, or the query's variables for SELECT *).
    `terms`: (position, IRI, certain) of every IRI of a triple pattern, in order, once each; certain
    where every answer row matched it (so an answer with rows shows the KG has it there)."""

    text: str
    form: str  # 'SelectQuery' or 'AskQuery'
    head: str = ""
    order: str = ""
    limit: int | None = None
    offset: int | None = None
    tail: str = ""
    keys: tuple[str, ...] = ()
    terms: tuple[tuple[str, str, bool], ...] = ()


class Writer(ExpressionWriter):
    """Writes one parsed query (`write`); checks every IRI, service, function and graph on the way."""

    def __init__(self, policy: QueryPolicy):
        self.policy = policy
        self.base: str | None = None
        self.prefixes: dict[str, str] = dict(policy.prefixes)  # the query's own PREFIX lines win
        self.out: list[str] = []
        # What the check against the KG and the pages need (Written), gathered on the way.
        self._terms: dict[tuple[str, str], bool] = {}
        self._certain = True  # in a part every answer row matched (not OPTIONAL, UNION, MINUS, EXISTS...)
        self._in_service = False
        self._scope: dict[str, None] = {}  # variables in scope in the group being written
        self._depth = 0  # sub-selects around what is being written
        self._aggregated_at: set[int] = set()  # depths of sub-selects where an aggregate was written
        self._marks: dict[str, int] = {}
        self._limits: dict[str, int] = {}

    # --- the query ------------------------------------------------------------------------------
    def write(self, parsed) -> Written:
        """The written form of the parse `parsed` ([prologue, query])."""
        prologue, query = parsed[0], parsed[1]
        for declaration in prologue:
            self._declare(declaration)
        name = getattr(query, "name", None)
        keys: list[str] = []
        if name == "SelectQuery":
            keys = self._select(query, top=True)
        elif name == "AskQuery":
            self._emit("ASK")
            self._dataset(query)
            self._where(query, top=True)
        else:
            raise refuse(query)
        if 0 in self._aggregated_at and not field(query, "groupby"):
            # One row (COUNT 0) even when nothing matched: rows prove no pattern's IRIs.
            self._terms = dict.fromkeys(self._terms, False)
        order, limit, values = self._marks["order"], self._marks["limit"], self._marks["values"]
        return Written(
            text=" ".join(self.out),
            form=name,
            head=" ".join(self.out[:order]),
            order=" ".join(self.out[order + 2 : limit]),  # past ORDER BY
            limit=self._limits.get("limit"),
            offset=self._limits.get("offset"),
            tail=" ".join(self.out[values:]),
            keys=tuple(keys),
            terms=tuple((position, iri, certain) for (position, iri), certain in self._terms.items()),
        )

    def _declare(self, declaration: CompValue) -> None:
        if declaration.name == "Base":
            self.base = self._absolute(str(declaration["iri"]))
        elif declaration.name == "PrefixDecl":
            self.prefixes[field(declaration, "prefix", "")] = self._resolved(str(declaration["iri"]))
        else:
            raise refuse(declaration)

    def _select(self, query: CompValue, *, top: bool) -> list[str]:
        """Writes a SELECT; returns the variables of its rows (for SELECT *, those in scope)."""
        self._emit("SELECT")
        if modifier := field(query, "modifier"):
            self._emit(str(modifier).upper())
        projection = field(query, "projection")
        if not projection:
            self._emit("*")
        projected = []
        for item in projection or ():
            if item.name != "vars":
                raise refuse(item)
            if "var" in item:
                projected.append(self._variable(item["var"]))
                self._emit(projected[-1])
            else:
                self._emit("(")
                self._expression(item["expr"])
                projected.append(self._variable(item["evar"]))
                self._emit("AS", projected[-1], ")")
        if top:
            self._dataset(query)
        self._where(query, top=top)
        return projected or list(self._scope)

    def _dataset(self, query: CompValue) -> None:
        if field(query, "datasetClause"):
            raise refused_dataset()
        for graph in self.policy.graphs:
            self._emit("FROM", self._checked_iri(graph))
        for graph in self.policy.graphs:
            self._emit("FROM", "NAMED", self._checked_iri(graph))

    def _where(self, query: CompValue, *, top: bool = False) -> None:
        self._emit("WHERE")
        self._group(query["where"])
        if group := field(query, "groupby"):
            self._emit("GROUP", "BY")
            for condition in group["condition"]:
                self._group_condition(condition)
        if having := field(query, "having"):
            self._emit("HAVING")
            for condition in having["condition"]:
                self._bracketed(condition)
        if top:
            self._marks["order"] = len(self.out)
        if order := field(query, "orderby"):
            self._emit("ORDER", "BY")
            for condition in order["condition"]:
                self._order_condition(condition)
        if top:
            self._marks["limit"] = len(self.out)
        if limits := field(query, "limitoffset"):
            for word in ("limit", "offset"):
                if (value := field(limits, word)) is not None:
                    self._emit(word.upper(), str(int(value)))
                    if top:
                        self._limits[word] = int(value)
        if top:
            self._marks["values"] = len(self.out)
        if values := field(query, "valuesClause"):
            self._values(values)

    def _group_condition(self, condition) -> None:
        if isinstance(condition, CompValue) and condition.name == "GroupAs":
            self._emit("(")
            self._expression(condition["expr"])
            if (var := field(condition, "var")) is not None:
                self._emit("AS", self._variable(var))
            self._emit(")")
        elif isinstance(condition, Variable):
            self._emit(self._variable(condition))
        else:  # a built-in or function call
            self._bracketed(condition)

    def _order_condition(self, condition: CompValue) -> None:
        if condition.name != "OrderCondition":
            raise refuse(condition)
        expression = condition["expr"]
        if order := field(condition, "order"):
            self._emit(str(order).upper())
            self._bracketed(expression)
        elif isinstance(expression, Variable):
            self._emit(self._variable(expression))
        else:
            self._bracketed(expression)

    # --- graph patterns -------------------------------------------------------------------------
    def _group(self, group: CompValue) -> None:
        """`{ ... }`: a sub-select or the parts of a group."""
        self._emit("{")
        if group.name == "SubSelect":
            # Its own scope: only its rows' variables reach the group around it. Its patterns are not
            # proven by rows (an aggregate gives a row of 0; LIMIT, OPTIONAL around it).
            outer, certain, self._scope, self._certain = self._scope, self._certain, {}, False
            self._depth += 1
            try:
                projected = self._select(group, top=False)
            finally:
                self._depth -= 1
                self._scope, self._certain = outer, certain
            self._scope.update(dict.fromkeys(projected))
        elif group.name == "GroupGraphPatternSub":
            for part in field(group, "part") or ():
                self._part(part)
        else:
            raise refuse(group)
        self._emit("}")

    def _part(self, part: CompValue) -> None:
        name = part.name
        if name == "TriplesBlock":
            for triples in part["triples"]:
                self._triples(triples)
        elif name == "GroupOrUnionGraphPattern":
            branches = part["graph"]
            with self._uncertain(len(branches) > 1):
                for i, group in enumerate(branches):
                    if i:
                        self._emit("UNION")
                    self._group(group)
        elif name == "OptionalGraphPattern":
            self._emit("OPTIONAL")
            with self._uncertain():
                self._group(part["graph"])
        elif name == "MinusGraphPattern":
            self._emit("MINUS")
            with self._uncertain(scoped=False):
                self._group(part["graph"])
        elif name == "GraphGraphPattern":
            self._graph(part)
        elif name == "ServiceGraphPattern":
            self._service(part)
        elif name == "Filter":
            self._emit("FILTER")
            self._bracketed(part["expr"])
        elif name == "Bind":
            self._emit("BIND", "(")
            self._expression(part["expr"])
            self._emit("AS", self._in_scope(part["var"]), ")")
        elif name == "InlineData":
            self._values(part)
        else:
            raise refuse(part)

    def _graph(self, part: CompValue) -> None:
        term = part["term"]
        if isinstance(term, Variable) and self.policy.graphs:
            # GRAPH ?g reads only the graphs of the dataset, whatever the engine does with FROM NAMED.
            self._emit("{", "VALUES", self._in_scope(term), "{", *map(self._checked_iri, self.policy.graphs), "}")
            self._emit("GRAPH", self._variable(term))
            self._group(part["graph"])
            self._emit("}")
            return
        if isinstance(term, Variable):
            self._emit("GRAPH", self._in_scope(term))
        else:
            iri = self._iri_of(term)
            self.policy.check_graph(iri)
            self._emit("GRAPH", self._checked_iri(iri))
        self._group(part["graph"])

    def _service(self, part: CompValue) -> None:
        term = part["term"]
        iri = None if isinstance(term, Variable) else self._iri_of(term)
        self.policy.check_service(iri)
        self._emit("SERVICE")
        if field(part, "silent"):
            self._emit("SILENT")
        self._emit(self._checked_iri(iri))
        # Its patterns are the other service's (Wikidata's label service), not this KG's.
        outer, self._in_service = self._in_service, True
        try:
            with self._uncertain():
                self._group(part["graph"])
        finally:
            self._in_service = outer

    def _triples(self, terms) -> None:
        """One subject's triples, as rdflib flattens them (s p o s p o ...)."""
        terms = list(terms)
        if len(terms) % 3:
            raise InvalidInput("A triple pattern in the query is incomplete.", "Write each pattern as subject predicate object.")
        for at in range(0, len(terms), 3):
            subject, verb, obj = terms[at : at + 3]
            self._emit(self._term(subject))
            predicate = self._verb(verb)
            self._emit(self._term(obj), ".")
            self._note_node(subject, NODE)
            self._note_node(obj, CLASS if predicate == RDF_TYPE else NODE)

    def _values(self, block: CompValue) -> None:
        """VALUES, always in its full form: `VALUES ( ?a ?b ) { ( 1 UNDEF ) }`."""
        variables = [self._in_scope(v) for v in field(block, "var") or ()]
        rows = field(block, "value") or []
        if any(not isinstance(row, (list, ParseResults)) for row in rows):
            if len(variables) != 1:
                raise refuse(block)
            rows = [[row] for row in rows]  # the one-variable form: VALUES ?x { 1 2 }
        self._emit("VALUES", "(", *variables, ")", "{")
        for row in rows:
            row = list(row)
            if len(row) != len(variables):
                raise InvalidInput(
                    f"A VALUES row has {len(row)} values for {len(variables)} variables.",
                    "Give each row one value (or UNDEF) per variable.",
                )
            self._emit("(", *("UNDEF" if value == "UNDEF" else self._term(value) for value in row), ")")
        self._emit("}")

    # --- paths ----------------------------------------------------------------------------------
    def _verb(self, verb) -> str | None:
        """Writes a triple's verb; returns its IRI when it is a plain predicate."""
        if isinstance(verb, Variable):
            self._emit(self._in_scope(verb))
            return None
        single = self._single_iri(verb)
        if single is not None:  # a plain predicate, the one place bif:contains may stand
            iri = self._iri_of(single)
            self._emit(self._checked_iri(iri, predicate=True))
            self._note(PREDICATE, iri)
            return iri
        self._emit(self._path(verb))
        return None

    def _single_iri(self, path):
        """The IRI a path is made of when it is just one IRI with no operator, else None."""
        while isinstance(path, CompValue) and path.name in ("PathAlternative", "PathSequence"):
            parts = path["part"]
            if len(parts) != 1:
                return None
            path = parts[0]
        if isinstance(path, CompValue) and path.name == "PathElt" and field(path, "mod") is None:
            path = path["part"]
        return path if self._is_iri(path) else None

    def _path(self, path, *, noted: bool = True) -> str:
        """A property path; its IRIs are noted as predicates (`noted`), but for a negated set's."""
        if self._is_iri(path):
            iri = self._iri_of(path)
            if noted:
                self._note(PREDICATE, iri)
            return self._checked_iri(iri)
        name = getattr(path, "name", None)
        if name in ("PathAlternative", "PathSequence"):
            with self._uncertain(name == "PathAlternative" and len(path["part"]) > 1, scoped=False):
                parts = [self._path(p, noted=noted) for p in path["part"]]
            joined = f" {'|' if name == 'PathAlternative' else '/'} ".join(parts)
            return joined if len(parts) == 1 else f"( {joined} )"
        if name == "PathElt":
            mod = field(path, "mod")
            with self._uncertain(str(mod) in ("?", "*"), scoped=False):  # matched by no step at all
                inner = self._path(path["part"], noted=noted)
            if mod is None:
                return inner
            if str(mod) not in ("?", "*", "+"):
                raise refuse(path)
            return f"( {inner} ){mod}"
        if name == "PathEltOrInverse":
            return f"^ {self._path(path['part'], noted=noted)}"
        if name == "PathNegatedPropertySet":
            parts = field(path, "part") or []
            return "! ( " + " | ".join(self._path(p, noted=False) for p in parts) + " )"
        raise refuse(path)

    # --- terms ----------------------------------------------------------------------------------
    def _term(self, term) -> str:
        if isinstance(term, Variable):
            return self._variable(term)
        if isinstance(term, BNode):
            label = str(term)
            if not _BNODE_LABEL.fullmatch(label):
                raise InvalidInput(f"The blank node label _:{label[:40]} cannot be used.", "Use a ?variable instead.")
            return "_:" + label
        if self._is_iri(term):
            return self._checked_iri(self._iri_of(term))
        if isinstance(term, CompValue) and term.name == "literal":
            text = string_literal(str(term["string"]))
            if (lang := field(term, "lang")) is not None:
                if not _LANGTAG.fullmatch(str(lang)):
                    raise InvalidInput(f"@{str(lang)[:20]} is not a language tag.", "Write tags such as @en or @en-GB.")
                return f"{text}@{lang}"
            if (datatype := field(term, "datatype")) is not None:
                return f"{text}^^{self._checked_iri(self._iri_of(datatype))}"
            return text
        if isinstance(term, Literal):
            return self._literal(term)
        raise refuse(term)

    def _literal(self, literal: Literal) -> str:
        """A number or boolean as the grammar writes it; anything else as a typed string."""
        lexical, datatype = str(literal), str(literal.datatype or "")
        pattern = _NUMBERS.get(datatype)
        if pattern is not None and pattern.fullmatch(lexical):
            return lexical
        if datatype == _BOOLEAN and lexical in ("true", "false"):
            return lexical
        if not datatype or literal.language:
            raise refuse(literal)
        return f"{string_literal(lexical)}^^{self._checked_iri(datatype)}"

    @staticmethod
    def _variable(variable) -> str:
        name = str(variable)
        if not isinstance(variable, Variable) or not _VARNAME.fullmatch(name):
            raise InvalidInput(f"?{name[:40]} is not a variable name.", "Name variables with letters, digits and _.")
        return "?" + name

    @staticmethod
    def _is_iri(term) -> bool:
        return isinstance(term, URIRef) or (isinstance(term, CompValue) and term.name == "pname")

    def _iri_of(self, term) -> str:
        """The absolute IRI of an <IRI> or a prefixed name."""
        if isinstance(term, URIRef):
            return self._absolute(str(term))
        if not (isinstance(term, CompValue) and term.name == "pname"):
            raise refuse(term)
        prefix = field(term, "prefix", "")
        local = _LOCAL_ESCAPE.sub(lambda m: m.group(1), field(term, "localname", ""))
        if prefix in self.prefixes:
            return self._absolute(self.prefixes[prefix] + local)
        if prefix in _ENGINE_PREFIXES:
            return self._absolute(f"{prefix}:{local}")  # Virtuoso's own: refused or allowed by the policy
        raise InvalidInput(
            f"The prefix {prefix}: is not declared.",
            f"Add PREFIX {prefix}: <namespace IRI> before SELECT, or write the IRI in full in < >.",
        )

    def _resolved(self, iri: str) -> str:
        """A PREFIX's IRI, resolved against BASE when relative (checked as a whole where it is used)."""
        if _SCHEME.match(iri) or self.base is None:
            return iri
        return urllib.parse.urljoin(self.base, iri)

    def _absolute(self, iri: str) -> str:
        """`iri` resolved against BASE; an error unless the result is absolute and can stand in < >."""
        if not _SCHEME.match(iri) and self.base is not None:
            iri = urllib.parse.urljoin(self.base, iri)
        if not _SCHEME.match(iri):
            raise InvalidInput(
                f"<{iri[:80]}> is a relative IRI; kg-mcp runs queries with absolute IRIs only.",
                "Write the IRI in full, e.g. <http://example.org/thing>.",
            )
        if not _IRIREF.fullmatch(iri):
            raise InvalidInput(f"<{iri[:80]}> is not a valid IRI.", "Write the IRI without spaces, quotes or brackets.")
        return iri

    def _checked_iri(self, iri: str | None, *, predicate: bool = False) -> str:
        assert iri is not None
        self.policy.check_iri(iri, predicate=predicate)
        return f"<{iri}>"

    def _emit(self, *tokens: str) -> None:
        self.out.extend(tokens)

    # --- what the check and the pages need ------------------------------------------------------
    def _in_scope(self, variable) -> str:
        """A variable written where it comes into scope (a pattern, BIND, VALUES, GRAPH ?g)."""
        written = self._variable(variable)
        self._scope[written] = None
        return written

    def _note(self, position: str, iri: str) -> None:
        """An IRI of a triple pattern, for the check against the KG (not a service's own)."""
        if self._in_service:
            return
        key = (position, iri)
        self._terms[key] = self._terms.get(key, False) or self._certain

    def _note_node(self, term, position: str) -> None:
        if isinstance(term, Variable):
            self._scope[self._variable(term)] = None
        elif self._is_iri(term):
            self._note(position, self._iri_of(term))

    @contextmanager
    def _uncertain(self, when: bool = True, *, scoped: bool = True):
        """Within: patterns an answer row need not have matched (`when`); with not `scoped`, their
        variables do not come into scope either (MINUS, EXISTS)."""
        certain, scope = self._certain, self._scope
        self._certain = certain and not when
        if not scoped:
            self._scope = dict(scope)
        try:
            yield
        finally:
            self._certain = certain
            self._scope = scope


def written(parsed, policy: QueryPolicy) -> Written:
    """The written form of a parsed query under `policy` (module docstring)."""
    return Writer(policy).write(parsed)
