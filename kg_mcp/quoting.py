"""Input quoted in error messages: a short prefix, never the whole of what a client sent; URLs
shown without their passwords."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

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


def shown_url(url: str) -> str:
    """The URL without its user, password, query and fragment, for logs, errors and what callers read.

    >>> shown_url("redis://:secret@10.0.0.5:6379/0"), shown_url("https://u:p@sparql.example.org/q?key=k")
    ('redis://10.0.0.5:6379/0', 'https://sparql.example.org/q')
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
