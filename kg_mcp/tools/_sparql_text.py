"""A query's canonical text: what the read-only check reads and exactly what the engine runs.

Parsers disagree at the edges of SPARQL's lexical grammar: rdflib ends a `#` comment at `\\n`
only, pyoxigraph and endpoints also at `\\r`; rdflib decodes `\\u` escapes everywhere, pyoxigraph
only inside IRIs and strings. A query written in that gap reads as harmless to the check and as a
SERVICE call to the engine. So the query is lexed once here, following the SPARQL 1.1 terminals
(codepoint escapes decoded first, as the spec says), and written back in a form where no such gap
is left: comments dropped, each run of whitespace one ASCII space, every string a short `"..."`
string whose line ends are escapes, no codepoint escape anywhere. The check parses that text and
the engine is sent that text, so both see the same tokens.

Prefixed names whose local part holds a dot or a `\\` escape are written as full IRIs when their
prefix is declared: pyoxigraph 0.5 misreads local parts with several dots (`ns:film.film.genre`).
Virtuoso's dialect, in which the papers' Freebase gold queries are written, is read as Virtuoso
reads it: xsd:, rdf:, rdfs: and owl: names that the query does not declare are written in full
(and Virtuoso's `xsd:datetime` cast as `xsd:dateTime`), and the words OR and AND as `||` and `&&`
(every ComplexWebQuestions query has `FILTER (!isLiteral(?x) OR lang(?x) = '' ...)`). SPARQL 1.1
has no such words, and a bare word is never a name in it, so nothing else can be meant.
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
_PN_PREFIX = f"[{_PN_CHARS_BASE}](?:[{_PN_CHARS}.]*[{_PN_CHARS}])?"
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
            ("pname", f"(?:{_PN_PREFIX})?:(?:{_PN_LOCAL})?"),
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
_ABSOLUTE_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_IRIREF = re.compile(f"<{_IRI_CHAR}*>")
_LOCAL_ESCAPE = re.compile(r"\\(.)")
_VIRTUOSO_OPERATORS = {"OR": "||", "AND": "&&"}
# Prefixes Virtuoso (and rdflib) know without a declaration, which the papers' gold queries use
# undeclared (CWQ's `ORDER BY xsd:datetime(?sk0)`); pyoxigraph knows none.
_PREDECLARED = {prefix: COMMON_PREFIXES[prefix] for prefix in ("xsd", "rdf", "rdfs", "owl")}
_VIRTUOSO_CASTS = {"datetime": "dateTime"}  # Virtuoso's spelling of the xsd:dateTime cast, in CWQ's queries


@dataclass(frozen=True)
class Token:
    kind: str  # iri, string, langtag, pname, bnode, var, number, word, punct
    text: str  # as written in the canonical text
    spaced: bool  # whitespace or a comment came before it in the query


@dataclass(frozen=True)
class CanonicalQuery:
    tokens: tuple[Token, ...]
    prefixes: dict[str, str]  # the query's PREFIX declarations, name -> namespace (a later one wins)

    @property
    def text(self) -> str:
        """The text to check and to run: tokens joined by single spaces where the query had space."""
        return self._joined(" ")

    def lines(self) -> str:
        """The same tokens with a line break where `text` has a space (rdflib misreads a long line
        whose IRIs hold '#'); tokens never hold a raw line break, so the tokens are unchanged."""
        return self._joined("\n")

    def _joined(self, space: str) -> str:
        return "".join((space if t.spaced and i else "") + t.text for i, t in enumerate(self.tokens))

    def words(self) -> list[str]:
        """Keywords and built-in names, upper-cased (SPARQL keywords ignore case)."""
        return [t.text.upper() for t in self.tokens if t.kind == "word"]


def canonical_query(query: str, *, max_tokens: int) -> CanonicalQuery:
    """The query's canonical form (module docstring); InvalidInput for text SPARQL cannot lex, or
    for more than `max_tokens` tokens (checking a query costs time per token)."""
    text = _decode_codepoint_escapes(query)
    tokens: list[Token] = []
    prefixes: dict[str, str] = {}
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
            value = _expanded(value, prefixes)
        elif kind == "word" and value.upper() in _VIRTUOSO_OPERATORS:
            kind, value = "punct", _VIRTUOSO_OPERATORS[value.upper()]
        tokens.append(Token(kind, value, spaced))
        spaced = False
        _note_prefix(tokens, prefixes)
    canonical = CanonicalQuery(tuple(tokens), prefixes)
    if _CODEPOINT_ESCAPE.search(canonical.text):
        raise InvalidInput(
            "A string in the query holds a backslash followed by u or U, which would be read as a "
            "\\u escape a second time.",
            "Write that character itself, or leave the backslash out.",
        )
    return canonical


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


def _note_prefix(tokens: list[Token], prefixes: dict[str, str]) -> None:
    """After `PREFIX p: <iri>`, remember p (a later declaration of the same name wins, as in SPARQL)."""
    if len(tokens) < 3 or [t.kind for t in tokens[-3:]] != ["word", "pname", "iri"]:
        return
    if tokens[-3].text.upper() == "PREFIX" and tokens[-2].text.endswith(":"):
        prefixes[tokens[-2].text[:-1]] = tokens[-1].text[1:-1]


def _expanded(pname: str, prefixes: dict[str, str]) -> str:
    """`pname` as a full <IRI> when its local part holds a dot or an escape and its prefix is declared
    with an absolute IRI, or when its prefix is one Virtuoso declares itself (xsd:, rdf:, ...) and the
    query does not; else unchanged."""
    prefix, _, local = pname.partition(":")
    namespace = prefixes.get(prefix)
    if namespace is None and prefix in _PREDECLARED and local:
        namespace = _PREDECLARED[prefix]
        local = _VIRTUOSO_CASTS.get(local, local) if prefix == "xsd" else local
    elif namespace is None or not _ABSOLUTE_IRI.match(namespace) or not ("." in local or "\\" in local):
        return pname
    iri = f"<{namespace}{_LOCAL_ESCAPE.sub(lambda m: m.group(1), local)}>"
    return iri if _IRIREF.fullmatch(iri) else pname


def _excerpt(text: str, at: int) -> str:
    return text[at : at + 20]
