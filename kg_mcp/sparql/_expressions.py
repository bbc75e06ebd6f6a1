"""What the writer (kg_mcp.sparql.writer) writes of expressions: FILTER, BIND, HAVING, ORDER BY and
projected expressions, built-in calls, functions called by IRI and aggregates, every operator in
brackets; and what the writer's parts share (a parse-tree node's field, a refusal in our words, a
string escaped by us).
"""

from __future__ import annotations

import re

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import URIRef

from kg_mcp.errors import InvalidInput, QueryRefused

_CODEPOINT_ESCAPE = re.compile(r"\\[uU][0-9A-Fa-f]{4}")
_STRING_ESCAPES = str.maketrans(
    {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
)
_CHAINS = {"ConditionalOrExpression": "||", "ConditionalAndExpression": "&&"}
_UNARY = {"UnaryNot": "!", "UnaryPlus": "+", "UnaryMinus": "-"}
# Built-in calls by the fields their arguments are in, in order (rdflib names them so).
_ONE = ("arg",)
_TWO = ("arg1", "arg2")
_BUILTIN_ARGS = {
    **{name: () for name in ("RAND", "NOW", "UUID", "STRUUID")},
    **{name: _ONE for name in (
        "STR", "LANG", "DATATYPE", "BOUND", "IRI", "URI", "ABS", "CEIL", "FLOOR", "ROUND", "STRLEN",
        "UCASE", "LCASE", "ENCODE_FOR_URI", "YEAR", "MONTH", "DAY", "HOURS", "MINUTES", "SECONDS",
        "TIMEZONE", "TZ", "MD5", "SHA1", "SHA256", "SHA384", "SHA512", "isIRI", "isURI", "isBLANK",
        "isLITERAL", "isNUMERIC", "BNODE",
    )},
    **{name: _TWO for name in (
        "LANGMATCHES", "CONTAINS", "STRSTARTS", "STRENDS", "STRBEFORE", "STRAFTER", "STRLANG", "STRDT",
        "sameTerm",
    )},
    "IF": ("arg1", "arg2", "arg3"),
    "REGEX": ("text", "pattern", "flags"),
    "SUBSTR": ("arg", "start", "length"),
    "REPLACE": ("arg", "pattern", "replacement", "flags"),
}  # fmt: skip
_LIST_BUILTINS = {"CONCAT", "COALESCE"}
_AGGREGATES = {
    "Aggregate_Count": "COUNT", "Aggregate_Sum": "SUM", "Aggregate_Min": "MIN", "Aggregate_Max": "MAX",
    "Aggregate_Avg": "AVG", "Aggregate_Sample": "SAMPLE", "Aggregate_GroupConcat": "GROUP_CONCAT",
}  # fmt: skip
# The constructs the writer refuses by name: what is said, and what to write instead.
_NOT_WRITTEN = {
    "ConstructQuery": ("CONSTRUCT queries are not allowed: only SELECT and ASK run.",
                       "Rewrite it as a SELECT, e.g. SELECT ?s ?p ?o WHERE { ... }."),
    "DescribeQuery": ("DESCRIBE queries are not allowed: only SELECT and ASK run.",
                      "Rewrite it as a SELECT, e.g. SELECT ?p ?o WHERE { <iri> ?p ?o }."),
    "InversePath": ("An inverse step inside a negated property set, !(^p), is not allowed: kg-mcp cannot write it back.",
                    "List the inverse step with ^ outside the !(...)."),
    "DistinctPath": ("DISTINCT(path) is not allowed: it is not SPARQL 1.1.", "Use SELECT DISTINCT instead."),
}  # fmt: skip


def field(node: CompValue, key: str, default=None):
    """A field of a parse-tree node (CompValue.get returns the key itself when the field is missing)."""
    return dict.get(node, key, default)


def refuse(node) -> QueryRefused:
    name = getattr(node, "name", type(node).__name__)
    message, hint = _NOT_WRITTEN.get(name, (
        f"The construct {name} is not allowed: kg-mcp runs only the SPARQL 1.1 it can write back itself.",
        "Rewrite the query with standard SPARQL 1.1 SELECT syntax.",
    ))
    return QueryRefused(message, hint)


class ExpressionWriter:
    """The expression half of kg_mcp.sparql.writer.Writer (which gives `_emit`, `_term`, `_group`,
    `_iri_of`, `_checked_iri`, `_uncertain` and the policy)."""

    def _bracketed(self, expression) -> None:
        self._emit("(")
        self._expression(expression)
        self._emit(")")

    def _expression(self, node) -> None:
        if not isinstance(node, CompValue):
            self._emit(self._term(node))
            return
        name = node.name
        if name in _CHAINS:
            others = field(node, "other") or []
            if not others:
                self._expression(node["expr"])
                return
            self._emit("(")
            self._expression(node["expr"])
            for other in others:
                self._emit(_CHAINS[name])
                self._expression(other)
            self._emit(")")
        elif name == "RelationalExpression":
            if field(node, "op") is None:
                self._expression(node["expr"])
                return
            op = str(node["op"]).upper()
            self._emit("(")
            self._expression(node["expr"])
            if op in ("IN", "NOT IN"):
                self._emit(*op.split())
                self._expression_list(node["other"])
            elif op in ("=", "!=", "<", ">", "<=", ">="):
                self._emit(op)
                self._expression(node["other"])
            else:
                raise refuse(node)
            self._emit(")")
        elif name in ("AdditiveExpression", "MultiplicativeExpression"):
            ops, others = field(node, "op") or [], field(node, "other") or []
            if not ops:
                self._expression(node["expr"])
                return
            self._emit("(")
            self._expression(node["expr"])
            for op, other in zip(ops, others, strict=True):
                if op not in ("+", "-", "*", "/"):
                    raise refuse(node)
                self._emit(op)
                self._expression(other)
            self._emit(")")
        elif name in _UNARY:
            self._emit(_UNARY[name])
            self._expression(node["expr"])
        elif name == "Function":
            self._function(node)
        elif name in _AGGREGATES:
            self._aggregate(node)
        elif name.startswith("Builtin_"):
            self._builtin(node)
        elif name in ("pname", "literal"):
            self._emit(self._term(node))
        else:
            raise refuse(node)

    def _expression_list(self, items, call: str = "") -> None:
        """`( e1 , e2 )`, or `CALL( e1 , e2 )` glued to the name of a call; rdflib gives `()` as rdf:nil."""
        items = [] if isinstance(items, URIRef) else list(items)
        self._emit(call + "(")
        for i, item in enumerate(items):
            if i:
                self._emit(",")
            self._expression(item)
        self._emit(")")

    def _function(self, node: CompValue) -> None:
        iri = self._iri_of(node["iri"])
        self.policy.check_function(iri)
        self._emit(self._checked_iri(iri) + "(")
        if field(node, "distinct"):
            self._emit("DISTINCT")
        for i, argument in enumerate(field(node, "expr") or []):
            if i:
                self._emit(",")
            self._expression(argument)
        self._emit(")")

    def _aggregate(self, node: CompValue) -> None:
        self._aggregated_at.add(self._depth)
        self._emit(_AGGREGATES[node.name] + "(")
        if field(node, "distinct"):
            self._emit("DISTINCT")
        over = node["vars"]
        if over == "*" and node.name == "Aggregate_Count":
            self._emit("*")
        else:
            self._expression(over)
        if (separator := field(node, "separator")) is not None:
            self._emit(";", "SEPARATOR", "=", string_literal(str(separator)))
        self._emit(")")

    def _builtin(self, node: CompValue) -> None:
        keyword = node.name.removeprefix("Builtin_")
        if keyword in ("EXISTS", "NOTEXISTS"):
            self._emit(*(("NOT", "EXISTS") if keyword == "NOTEXISTS" else ("EXISTS",)))
            with self._uncertain(scoped=False):
                self._group(node["graph"])
            return
        if keyword in _LIST_BUILTINS:
            self._expression_list(node["arg"], keyword)
            return
        if keyword not in _BUILTIN_ARGS:
            raise refuse(node)
        self._emit(keyword + "(")
        first = True
        for name in _BUILTIN_ARGS[keyword]:
            if (argument := field(node, name)) is None:
                continue
            if not first:
                self._emit(",")
            first = False
            self._expression(argument)
        self._emit(")")


def string_literal(value: str) -> str:
    """A short double-quoted string; an error where an engine would read a \\u escape in it again."""
    escaped = value.translate(_STRING_ESCAPES)
    if _CODEPOINT_ESCAPE.search(escaped):
        raise InvalidInput(
            "A string in the query holds a backslash followed by u or U, which engines read as a \\u escape.",
            "Write that character itself, or leave the backslash out.",
        )
    return f'"{escaped}"'
