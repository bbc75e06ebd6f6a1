"""A user's query read into SPARQL 1.1 tokens, the dialect of the papers' gold queries included.

This is the front of the parse (kg_mcp.sparql.checked), not a check: what runs is written later
from rdflib's parse tree, so nothing here decides what an engine sees. It does four things:

- bounds the work: more than `max_tokens` tokens are refused before rdflib's parser (about 0.5 ms
  of CPU a token on the worst shapes) runs at all;
- reads the text as the spec says, where rdflib does not: codepoint escapes decoded once, first;
  comments ended by \\r as well as \\n; long strings made short strings with escaped line ends.
  The tokens are then handed to rdflib one a line (it misreads a long line whose IRIs hold '#');
- reads Virtuoso's dialect, in which the papers' Freebase gold queries are written, as Virtuoso
  reads it: xsd:, rdf:, rdfs: and owl: names that the query does not declare are written in full
  (and Virtuoso's `xsd:datetime` cast as `xsd:dateTime`), and the words OR and AND as `||` and `&&`
  (every ComplexWebQuestions query has `FILTER (!isLiteral(?x) OR lang(?x) = '' ...)`). SPARQL 1.1
  has no such words, and a bare word is never a name in it, so nothing else can be meant;
- names the words that only an update has, for a clear refusal before any parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kg_mcp.errors import InvalidInput
from kg_mcp.profiles import COMMON_PREFIXES

# --- the SPARQL 1.1 terminals (https://www.w3.org/TR/sparql11-query/#terminals) -----------------
_PN_CHARS_BASE = (
    "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c-\u200d"
    "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd\U00010000-\U000effff"
)
_PN_CHARS_U = _PN_CHARS_BASE + "_"
_PN_CHARS = _PN_CHARS_U + "\\-0-9\u00b7\u0300-\u036f\u203f-\u2040"
_VARNAME = f"[{_PN_CHARS_U}0-9][{_PN_CHARS_U}0-9\u00b7\u0300-\u036f\u203f-\u2040]*"
PN_PREFIX = f"[{_PN_CHARS_BASE}](?:[{_PN_CHARS}.]*[{_PN_CHARS}])?"  # a prefix's name
_PLX = r"%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%]"
_PN_LOCAL = f"(?:[{_PN_CHARS_U}:0-9]|{_PLX})(?:(?:[{_PN_CHARS}.:]|{_PLX})*(?:[{_PN_CHARS}:]|{_PLX}))?"
_IRI_CHAR = r'[^<>"{}|^`\\\x00-\x20]'
_EXPONENT = r"[eE][+-]?[0-9]+"
_ECHAR = r"\\[tbnrf\\\"']"

_TOKEN = re.compile(
    "|".join(
        f"(?P<{kind}>{pattern})"
        for kind, pattern in (
            ("space", r"[ \t\r\n]+"),
            ("comment", r"#[^\r\n]*"),
            ("iri", f"<{_IRI_CHAR}*>"),
            ("long1", rf"'''(?:(?:'|'')?(?:[^'\\]|{_ECHAR}))*'''"),
            ("long2", rf'"""(?:(?:"|"")?(?:[^"\\]|{_ECHAR}))*"""'),
            ("short1", rf"'(?:[^'\\\n\r]|{_ECHAR})*'"),
            ("short2", rf'"(?:[^"\\\n\r]|{_ECHAR})*"'),
            ("pname", f"(?:{PN_PREFIX})?:(?:{_PN_LOCAL})?"),
            ("bnode", f"_:[{_PN_CHARS_U}0-9](?:[{_PN_CHARS}.]*[{_PN_CHARS}])?"),
            ("var", f"[?$]{_VARNAME}"),
            ("langtag", "@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*"),
            ("number", rf"[0-9]+\.[0-9]*{_EXPONENT}|\.?[0-9]+{_EXPONENT}|[0-9]*\.[0-9]+|[0-9]+"),
            ("word", "[A-Za-z][A-Za-z0-9_]*"),
            ("punct", r"\^\^|\|\||&&|!=|<=|>=|[{}()\[\];,.=<>!+\-*/^|?]"),
        )
    )
)
_CODEPOINT_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_ECHAR_VALUES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_SHORT_STRING_ESCAPES = str.maketrans(
    {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
)
_IRIREF = re.compile(f"<{_IRI_CHAR}*>")
_LOCAL_ESCAPE = re.compile(r"\\(.)")
_VIRTUOSO_OPERATORS = {"OR": "||", "AND": "&&"}
# Prefixes Virtuoso (and rdflib) know without a declaration, which the papers' gold queries use
# undeclared (CWQ's `ORDER BY xsd:datetime(?sk0)`); pyoxigraph knows none.
_PREDECLARED = {prefix: COMMON_PREFIXES[prefix] for prefix in ("xsd", "rdf", "rdfs", "owl")}
_VIRTUOSO_CASTS = {"datetime": "dateTime"}  # Virtuoso's spelling of the xsd:dateTime cast, in CWQ's queries


# Words that only an update has (SPARQL 1.1 Update): a query holding one is refused by name.
UPDATE_WORDS = {
    "INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH", "USING"
}  # fmt: skip


@dataclass(frozen=True)
class Token:
    kind: str  # iri, string, langtag, pname, bnode, var, number, word, punct
    text: str  # as rdflib is given it
    spaced: bool  # whitespace or a comment came before it in the query


@dataclass(frozen=True)
class LexedQuery:
    tokens: tuple[Token, ...]

    @property
    def text(self) -> str:
        """The tokens joined by single spaces where the query had space (for messages and tests)."""
        return self._joined(" ")

    def lines(self) -> str:
        """The same tokens with a line break where `text` has a space: what rdflib parses (it
        misreads a long line whose IRIs hold '#'); tokens never hold a raw line break."""
        return self._joined("\n")

    def _joined(self, space: str) -> str:
        return "".join((space if t.spaced and i else "") + t.text for i, t in enumerate(self.tokens))

    def update_word(self) -> str | None:
        """The first word of the query that only an update has, if any."""
        return next((t.text.upper() for t in self.tokens if t.kind == "word" and t.text.upper() in UPDATE_WORDS), None)


def lex(query: str, *, max_tokens: int) -> LexedQuery:
    """The query's tokens (module docstring); InvalidInput for text SPARQL cannot lex, or for more
    than `max_tokens` tokens (parsing a query costs time per token)."""
    text = _decode_codepoint_escapes(query)
    tokens: list[Token] = []
    declared: set[str] = set()
    spaced, at = False, 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise InvalidInput(
                f"The query cannot be read at character {at + 1}: {_excerpt(text, at)!r}.",
                "Fix the SPARQL syntax (strings in quotes, IRIs in <...> without spaces, ?variables).",
            )
        at, kind, value = match.end(), match.lastgroup, match.group()
        if kind in ("space", "comment"):
            spaced = True
            continue
        if len(tokens) >= max_tokens:
            raise InvalidInput(
                f"The query has more than {max_tokens:,} terms (names, values and symbols); "
                "queries that long are not checked.",
                "Split it into smaller queries, or list values with VALUES rather than long chains of "
                "operators.",
            )
        if kind.startswith(("short", "long")):
            kind, value = "string", _short_string(value)
        elif kind == "pname":
            value = _predeclared(value, declared)
        elif kind == "word" and value.upper() in _VIRTUOSO_OPERATORS:
            kind, value = "punct", _VIRTUOSO_OPERATORS[value.upper()]
        tokens.append(Token(kind, value, spaced))
        spaced = False
        _note_prefix(tokens, declared)
    lexed = LexedQuery(tuple(tokens))
    if _CODEPOINT_ESCAPE.search(lexed.text):
        raise InvalidInput(
            "A string in the query holds a backslash followed by u or U, which would be read as a "
            "\\u escape a second time.",
            "Write that character itself, or leave the backslash out.",
        )
    return lexed


def _decode_codepoint_escapes(query: str) -> str:
    """\\uXXXX and \\UXXXXXXXX replaced by their characters, once, before lexing (the spec's order)."""

    def decode(match: re.Match) -> str:
        code = int(match.group(1) or match.group(2), 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF or code == 0:
            raise InvalidInput(
                f"The query holds the escape {match.group()!r}, which is not a valid character.",
                "Use escapes of real characters (\\u0000-\\uD7FF, \\uE000-\\U0010FFFF, not NUL).",
            )
        return chr(code)

    return _CODEPOINT_ESCAPE.sub(decode, query)


def _short_string(literal: str) -> str:
    """Any of the four string forms as a short double-quoted string, its line ends escaped."""
    quote = 3 if literal[:3] in ("'''", '"""') else 1
    value = _LOCAL_ESCAPE.sub(lambda m: _ECHAR_VALUES[m.group(1)], literal[quote:-quote])
    return '"' + value.translate(_SHORT_STRING_ESCAPES) + '"'


def _note_prefix(tokens: list[Token], declared: set[str]) -> None:
    """After `PREFIX p: <iri>`, remember that p is declared."""
    if len(tokens) < 3 or [t.kind for t in tokens[-3:]] != ["word", "pname", "iri"]:
        return
    if tokens[-3].text.upper() == "PREFIX" and tokens[-2].text.endswith(":"):
        declared.add(tokens[-2].text[:-1])


def _predeclared(pname: str, declared: set[str]) -> str:
    """`pname` as a full <IRI> when its prefix is one Virtuoso declares itself (xsd:, rdf:, ...) and
    the query does not; else unchanged."""
    prefix, _, local = pname.partition(":")
    if prefix in declared or prefix not in _PREDECLARED or not local:
        return pname
    local = _LOCAL_ESCAPE.sub(lambda m: m.group(1), local)
    if prefix == "xsd":
        local = _VIRTUOSO_CASTS.get(local, local)
    iri = f"<{_PREDECLARED[prefix]}{local}>"
    return iri if _IRIREF.fullmatch(iri) else pname


def _excerpt(text: str, at: int) -> str:
    return text[at : at + 20]
