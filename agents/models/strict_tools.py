"""Tool schemas for OpenAI's strict function calling, and the arguments that come back.

In strict mode the provider guarantees the arguments fit the schema, but only for a subset of
JSON Schema: every object closed and every property listed as required, no `default`. An
optional argument is therefore offered as nullable ("null: leave it out") and a null that
comes back is removed before the call, so the tool sees the argument as absent and applies its
own default. A schema with a free-form object cannot be strict: it is offered as it is.
"""

from __future__ import annotations

import copy
import json
from typing import Any


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` in strict mode's subset, or None when it has an object without listed properties.

    >>> strict_schema({"type": "object", "properties": {"q": {"type": "string"},
    ...     "n": {"type": "integer", "default": 5}}, "required": ["q"]}) == {"type": "object",
    ...     "properties": {"q": {"type": "string"},
    ...                    "n": {"type": ["integer", "null"], "description": "Default 5; null leaves it out."}},
    ...     "required": ["q", "n"], "additionalProperties": False}
    True
    """
    try:
        return _strict(copy.deepcopy(schema))
    except _Open:
        return None


class _Open(Exception):
    """An object whose properties are not listed: strict mode cannot describe it."""


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _strict(value) for key, value in node.items()}
    if node.get("type") == "object":
        if not node.get("properties") or node.get("additionalProperties") not in (None, False):
            raise _Open
        optional = [name for name in node["properties"] if name not in node.get("required", ())]
        for name in optional:
            node["properties"][name] = _nullable(node["properties"][name])
        node["required"] = list(node["properties"])
        node["additionalProperties"] = False
    return node


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    prop = dict(prop)
    note = "null leaves it out."
    if "default" in prop:
        note = f"Default {json.dumps(prop.pop('default'))}; {note}"
    if "anyOf" in prop:
        prop["anyOf"] = [*prop["anyOf"], {"type": "null"}]
    elif "type" in prop:
        kinds = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        prop["type"] = [*kinds, "null"] if "null" not in kinds else kinds
    if "enum" in prop and None not in prop["enum"]:
        prop["enum"] = [*prop["enum"], None]
    prop["description"] = f"{prop['description'].rstrip()} {note}" if prop.get("description") else note[0].upper() + note[1:]
    return prop


def drop_absent(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments without the nulls strict mode made the model write for optional ones.

    >>> drop_absent({"q": "x", "n": None}, {"type": "object", "properties": {"q": {}, "n": {}}, "required": ["q"]})
    {'q': 'x'}
    """
    required = set(schema.get("required", ()))
    return {key: value for key, value in arguments.items() if value is not None or key in required}
