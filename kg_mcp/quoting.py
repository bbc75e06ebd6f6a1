"""Input quoted in error messages: a short prefix, never the whole of what a client sent."""

from __future__ import annotations

QUOTE_CHARS = 80


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """`value` as an error message quotes it: repr() of at most `limit` characters, '…' and the
    length when cut.

    >>> quoted("kg:Drama"), quoted("x" * 100, 5)
    ("'kg:Drama'", "'xxxxx…' (100 characters)")
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit] + '…'!r} ({len(text):,} characters)"


def clipped(text: str | None, limit: int = QUOTE_CHARS) -> str | None:
    """`text` in at most `limit` characters: whole when it fits, else cut with '…' as the last one.

    >>> clipped("kg:Drama"), clipped("x" * 100, 5), clipped(None)
    ('kg:Drama', 'xxxx…', None)
    """
    return text if text is None or len(text) <= limit else text[: limit - 1] + "…"
