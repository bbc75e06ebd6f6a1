"""Reading the JSON object out of a model's reply, which often wraps it in a code fence or prose."""

from __future__ import annotations

import json
from typing import Any


def json_object_span(text: str) -> tuple[int, int] | None:
    """Start and end of the first JSON object in `text` (the whole text if it is one), or None.

    >>> text = 'Sure! ```json\\n{"relation": "~directed_by"}\\n``` done'
    >>> start, end = json_object_span(text)
    >>> text[start:end]
    '{"relation": "~directed_by"}'
    >>> json_object_span("I would pick Jaws.") is None
    True
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return start, end
        start = text.find("{", end)
    return None


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The reply's JSON object: the first one found in the text, or None.

    >>> parse_json_object('{"anchor": "kg:Jaws"}')
    {'anchor': 'kg:Jaws'}
    >>> parse_json_object('prefix {"a": {"b": 1}} suffix {"c": 2}')
    {'a': {'b': 1}}
    """
    span = json_object_span(text)
    return None if span is None else json.loads(text[span[0] : span[1]])
