"""Tool arguments: portable input schemas, and argument errors in our words.

The SDK derives each tool's input schema from its signature with pydantic, which writes
`$defs`/`$ref` for nested models and `anyOf [X, null]` with `default: null` for optional ones.
Stricter clients (Gemini function declarations, some IDE validators) reject or mangle both, so
the schema we publish is `portable(...)` of it: references inlined, null unions reduced to the
plain type (the argument is simply optional), titles dropped, objects closed.

`ToolArguments` words what is wrong with a call's arguments, checked against that published
schema: one sentence naming the tool, the argument, what it must be and what came instead. A null
for an optional argument means "leave it out", which is what older clients that followed the
nullable schema send.

Every argument is capped (`CAPS`, in one place): a string's characters and a list's items, as
`maxLength`/`maxItems` in the published schema and checked first thing in `prepare`, before the
SDK copies the arguments into its models. A question is a sentence and an id is an id: a 4 MB
question, a 3 MB entity name or a million claims is refused in a line that says the cap and how to
fix the call, before any work is done.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

from kg_mcp.quoting import quoted
from kg_mcp.tools.follow import MAX_BRANCHES, MAX_EXCLUDE, MAX_HOPS, MAX_STARTS
from kg_mcp.tools.relations import MAX_RELATIONS
from kg_mcp.tools.search import MAX_FILTERS
from kg_mcp.tools.search_batch import MAX_ENTITIES
from kg_mcp.tools.sparql import MAX_QUERY_CHARS
from kg_mcp.tools.verify import MAX_CLAIMS

_DROPPED_KEYS = ("title", "$defs", "definitions")
_NAMED_UNKNOWN = 20  # unknown arguments named in an error; the rest are counted


def portable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with refs inlined, `X | None` as plain X, no titles, objects closed.

    >>> s = {"$defs": {"P": {"title": "P", "type": "object", "properties": {"a": {"type": "string"}}}},
    ...      "type": "object", "title": "args",
    ...      "properties": {"p": {"$ref": "#/$defs/P"},
    ...                     "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
    ...                     "title": {"type": "string", "title": "Title"}}}
    >>> portable(s) == {"type": "object", "additionalProperties": False, "properties": {
    ...     "p": {"type": "object", "additionalProperties": False, "properties": {"a": {"type": "string"}}},
    ...     "n": {"type": "integer"}, "title": {"type": "string"}}}
    True
    """
    defs = schema.get("$defs") or schema.get("definitions") or {}
    return _rewrite(schema, defs, ())


def _rewrite(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_rewrite(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            raise ValueError(f"recursive schema reference {name!r} cannot be inlined")
        merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
        return _rewrite(merged, defs, (*seen, name))
    out = {k: _rewrite(v, defs, seen) for k, v in node.items() if k not in _DROPPED_KEYS}
    if isinstance(node.get("properties"), dict):  # argument names are kept, even one called "title"
        out["properties"] = {name: _rewrite(sub, defs, seen) for name, sub in node["properties"].items()}
    for union in ("anyOf", "oneOf"):
        if union in out:
            branches = [b for b in out[union] if b != {"type": "null"}]
            if len(branches) < len(out[union]):  # X | None: the argument is optional, not nullable
                if out.get("default", 0) is None:
                    del out["default"]
                if len(branches) == 1:
                    del out[union]
                    out = {**branches[0], **out}
                else:
                    out[union] = branches
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


# --- caps -----------------------------------------------------------------------------------

# Characters of a string argument, by its name; any other string (an id, a label, a relation, a
# claimed value, a session id) is held to TEXT_CHARS. A schema's own maxLength wins when tighter.
TEXT_CHARS = 1_000
QUESTION_CHARS = 2_000
_TEXT_CAPS = {"question": QUESTION_CHARS, "query": MAX_QUERY_CHARS, "session": 200}
# Items of a list argument, by (tool, name) then by name; any other list: LIST_ITEMS. The tools
# check the same bounds again (they are called directly too); these refuse a call before any work.
LIST_ITEMS = 200
_LIST_CAPS = {
    "entities": MAX_ENTITIES,
    "claims": MAX_CLAIMS,
    "properties_to_filter_for": MAX_FILTERS,
    "relations": MAX_RELATIONS,
    "paths": MAX_BRANCHES,
    ("follow", "entities"): MAX_STARTS,
    ("follow", "path"): MAX_HOPS,
    ("follow", "exclude"): MAX_EXCLUDE,
}
_TEXT_FIX = {
    "question": "Ask the question in a sentence or two.",
    "query": "Write a shorter query.",
}


def capped_schema(tool: str, schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (portable) with a maxLength on every string and a maxItems on every list that lacks one.

    >>> s = capped_schema("t", {"type": "object", "properties": {"question": {"type": "string"},
    ...     "entities": {"type": "array", "items": {"type": "string"}}}})
    >>> s["properties"]["question"]["maxLength"], s["properties"]["entities"]["maxItems"], s["properties"]["entities"]["items"]["maxLength"]
    (2000, 200, 1000)
    """
    return _with_caps(tool, schema, None)


def _with_caps(tool: str, node: Any, name: str | None) -> Any:
    if not isinstance(node, dict):
        return node
    out = dict(node)
    if isinstance(node.get("properties"), dict):
        out["properties"] = {key: _with_caps(tool, sub, key) for key, sub in node["properties"].items()}
    for union in ("anyOf", "oneOf"):
        if isinstance(node.get(union), list):
            out[union] = [_with_caps(tool, branch, name) for branch in node[union]]
    if isinstance(node.get("items"), dict):
        out["items"] = _with_caps(tool, node["items"], None)
    kind = node.get("type")
    if kind == "string" and "enum" not in node:
        cap = _TEXT_CAPS.get(name or "", TEXT_CHARS)
        out["maxLength"] = min(node.get("maxLength", cap), cap)
    elif kind == "array":
        cap = _LIST_CAPS.get((tool, name or ""), _LIST_CAPS.get(name or "", LIST_ITEMS))
        out["maxItems"] = min(node.get("maxItems", cap), cap)
    return out


def _too_big(tool: str, value: Any, schema: dict[str, Any], where: str) -> str | None:
    """The first string or list in `value` past its cap in `schema`, in words; None if all fit.
    Cheap: lengths only, and a list's items are looked at only once its own length fits."""
    if isinstance(value, str):
        cap = _cap(schema, "maxLength")
        if cap is not None and len(value) > cap:
            name = where.rsplit(".", 1)[-1].split("[")[0]
            fix = _TEXT_FIX.get(name, "Pass an id or a name as the tools show it, not a text.")
            return f"At most {cap:,} characters in {where}; got {len(value):,}. {fix}"
    elif isinstance(value, list):
        cap = _cap(schema, "maxItems")
        if cap is not None and len(value) > cap:
            return f"At most {cap:,} items in {where}; got {len(value):,}. Split them over several calls."
        items = _branches(schema.get("items", {}))
        for i, item in enumerate(value):
            for branch in items:
                problem = _too_big(tool, item, branch, f"{where}[{i}]")
                if problem:
                    return problem
    elif isinstance(value, dict):
        properties: dict[str, Any] = {}
        for branch in _branches(schema):
            properties.update(branch.get("properties", {}))
        for key, item in value.items():
            if key in properties:
                problem = _too_big(tool, item, properties[key], f"{where}.{key}" if where else key)
                if problem:
                    return problem
    return None


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [schema, *schema.get("anyOf", ()), *schema.get("oneOf", ())]


def _cap(schema: dict[str, Any], key: str) -> int | None:
    caps = [b[key] for b in _branches(schema) if key in b]
    return max(caps) if caps else None


class ToolArguments:
    """One tool's published schema and its checks, built once per registered tool.

    A call is checked in two steps so that a good call costs next to nothing: `prepare` (before the
    SDK validates) drops nulls for optional arguments and refuses unknown ones, which the SDK would
    silently ignore; `explain` (only once the SDK has refused the arguments) finds the problem
    against the published schema and words it.
    """

    def __init__(self, tool: str, schema: dict[str, Any]):
        self.tool = tool
        self.schema = capped_schema(tool, portable(schema))
        self._validator = Draft202012Validator(self.schema)
        self._required = set(self.schema.get("required", ()))
        self._known = set(self.schema.get("properties", {}))
        self._closed = self.schema.get("additionalProperties") is False

    def prepare(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments without nulls for optional ones; ArgumentError for unknown ones.

        >>> search = ToolArguments("search", {"type": "object", "required": ["entity"], "properties": {
        ...     "entity": {"type": "string"},
        ...     "direction": {"enum": ["outgoing", "incoming"], "default": "outgoing", "type": "string"}}})
        >>> search.prepare({"entity": "kg:X", "direction": None})
        {'entity': 'kg:X'}
        >>> search.prepare({"entity": "kg:X", "sideways": True})
        Traceback (most recent call last):
        ...
        kg_mcp.arguments.ArgumentError: search: unknown argument 'sideways'; the arguments are 'entity' and 'direction'.
        """
        if self._closed:
            self._refuse_unknown(arguments)
        problem = _too_big(self.tool, arguments, self.schema, "")
        if problem:
            raise ArgumentError(f"{self.tool}: {problem}")
        return {k: v for k, v in arguments.items() if v is not None or k in self._required}

    def _refuse_unknown(self, arguments: dict[str, Any]) -> None:
        """ArgumentError naming the unknown arguments, if any. The scan stops after the first few it
        names: a call with 300,000 unknown keys costs what a call with 20 does (the count is the
        arguments less the known ones present, which needs no scan)."""
        if len(arguments) <= len(self._known) and arguments.keys() <= self._known:
            return
        unknown: list[str] = []
        for key in arguments:
            if key not in self._known:
                unknown.append(key)
                if len(unknown) == _NAMED_UNKNOWN:
                    break
        if not unknown:
            return
        count = len(arguments) - sum(key in arguments for key in self._known)
        shown = [quoted(key) for key in unknown] + ([f"{count - len(unknown):,} more"] if count > len(unknown) else [])
        names = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
        raise ArgumentError(
            f"{self.tool}: unknown argument{'s' * (count > 1)} {names}; the arguments are {_names(self.schema['properties'], 'and')}."
        )

    def explain(self, arguments: dict[str, Any]) -> None:
        """Raise ArgumentError for the first problem with `arguments`; return if the schema finds none.

        >>> ToolArguments("search", {"type": "object", "properties": {
        ...     "direction": {"enum": ["outgoing", "incoming"], "type": "string"}}}).explain({"direction": "sideways"})
        Traceback (most recent call last):
        ...
        kg_mcp.arguments.ArgumentError: search: direction must be 'outgoing' or 'incoming', got 'sideways'.
        """
        error = min(self._validator.iter_errors(arguments), key=_order, default=None)
        if error is not None:
            raise ArgumentError(f"{self.tool}: {_words(_closest(error))}")


class ArgumentError(ValueError):
    """A call whose arguments do not fit the tool's schema; the message says how to fix it."""


def _order(error: ValidationError) -> tuple:
    # Unknown and missing arguments first (they explain the rest), then the shallowest problem.
    top = error.validator in ("additionalProperties", "required")
    return (not top, len(error.absolute_path), list(map(str, error.absolute_path)))


def _closest(error: ValidationError) -> ValidationError:
    """For an object that fits no branch of an anyOf, the problem with the branch it resembles most."""
    if error.validator not in ("anyOf", "oneOf") or not isinstance(error.instance, dict) or not error.context:
        return error
    keys = set(error.instance)

    def overlap(branch: int) -> int:
        return len(keys & set(error.validator_value[branch].get("properties", {})))

    best = max(range(len(error.validator_value)), key=overlap)
    if overlap(best) == 0:
        return error
    inside = sorted((e for e in error.context if e.relative_schema_path[0] == best), key=_order)
    return _closest(inside[0]) if inside else error


def _where(error: ValidationError) -> str:
    where = ""
    for part in error.absolute_path:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    return where or "the arguments"


def _words(error: ValidationError) -> str:
    """One sentence for one jsonschema error, in our words (never the library's message)."""
    where, got, kind, rule = _where(error), _shown(error.instance), error.validator, error.validator_value
    if kind == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        extra = [name for name in error.instance if name not in known]
        prefix = "" if where == "the arguments" else f"{where}: "
        return f"{prefix}unknown argument{'s' * (len(extra) > 1)} {_names(extra)}; the arguments are {_names(known, 'and')}."
    if kind == "required":
        missing = [name for name in rule if name not in error.instance]
        prefix = "" if where == "the arguments" else f"{where}: "
        return f"{prefix}{_names(missing, 'and')} {'is' if len(missing) == 1 else 'are'} required. {usage(error.schema)}"
    if kind == "enum":
        return f"{where} must be {_names(rule, 'or')}, got {got}."
    if kind == "type":
        return f"{where} must be {_kind(error.schema)}, got {got}."
    if kind in ("anyOf", "oneOf"):
        shapes = " or ".join(_kind(branch) for branch in rule)
        return f"{where} must be {shapes}, got {got}."
    if kind in ("minimum", "exclusiveMinimum"):
        return f"{where} must be at least {rule + (kind == 'exclusiveMinimum')}, got {got}."
    if kind in ("maximum", "exclusiveMaximum"):
        return f"{where} must be at most {rule - (kind == 'exclusiveMaximum')}, got {got}."
    if kind in ("minItems", "maxItems"):
        bound = "at least" if kind == "minItems" else "at most"
        return f"{where} must have {bound} {rule} item{'s' * (rule != 1)}, got {len(error.instance)}."
    if kind in ("minLength", "maxLength"):
        bound = "at least" if kind == "minLength" else "at most"
        return f"{where} must have {bound} {rule} characters, got {len(error.instance)}."
    return f"{where} does not fit its schema ({kind}: {json.dumps(rule)}), got {got}."


def usage(schema: dict[str, Any]) -> str:
    """How to call: 'Pass entity (a string), direction (...)'."""
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    parts = [f"{name} ({_kind(sub)}{'' if name in required else ', optional'})" for name, sub in properties.items()]
    return f"Pass {', '.join(parts)}." if parts else ""


def _kind(schema: dict[str, Any]) -> str:
    """A schema in a few words: 'a string', 'a list of strings', 'an object {subject, relation, object}'."""
    if "enum" in schema:
        return _names(schema["enum"], "or")
    kind = schema.get("type")
    if kind == "array":
        items = _kind(schema.get("items", {}))
        for article, rest in (("a ", "s"), ("an ", "s")):
            if items.startswith(article) and " or " not in items:
                head, _, tail = items[len(article):].partition(" ")
                return f"a list of {head}{rest}{' ' + tail if tail else ''}"
        return f"a list of ({items})"
    if kind == "object" or "properties" in schema:
        return "an object {" + ", ".join(schema.get("properties", {})) + "}"
    if "anyOf" in schema:
        return " or ".join(_kind(b) for b in schema["anyOf"])
    return {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
            "null": "null"}.get(kind, "a value")


def _names(values, last: str = "and") -> str:
    values = list(values)
    shown = [quoted(v) if isinstance(v, str) else json.dumps(v) for v in values[:20]]
    if len(values) > len(shown):
        shown.append(f"{len(values) - len(shown):,} more")
    if len(shown) <= 1:
        return "".join(shown)
    return f"{', '.join(shown[:-1])} {last} {shown[-1]}"


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False)
        return f"{'an object' if isinstance(value, dict) else 'a list'} {text if len(text) <= 60 else text[:57] + '...'}"
    return json.dumps(value)
