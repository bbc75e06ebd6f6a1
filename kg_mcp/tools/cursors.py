"""Cursors: where a listing goes on from, as an opaque token the client hands back for the next page.

A cursor names the tool that issued it, a digest of that call's own arguments (so it reads on only
the call that made it), the graphs the caller read, the data's stamp (a reload makes it stale) and
the position reached: an offset, and optionally a small resume key of the tool's own. It is
signed with the server's cursor key (HMAC-SHA256), so an edited, forged or foreign token is
refused in our words rather than read. Tokens are URL-safe text of at most MAX_CURSOR_CHARS.

The key is the server's (Settings.cursor_key, KG_MCP_CURSOR_KEY): replicas behind one load
balancer share it (given, or kept in their shared Redis), so any replica reads on a page another
issued; without one, each process makes its own at start and a restart ends every cursor.

>>> key = b"k" * 32
>>> token = issue("follow", {"entity": "ex:a", "path": ["p"]}, 200, key=key)
>>> read("follow", {"entity": "ex:a", "path": ["p"], "cursor": token}, token, key=key).offset
200
>>> read("search", {"entity": "ex:a"}, token, key=key)
Traceback (most recent call last):
...
kg_mcp.errors.InvalidInput: This cursor was issued by another tool (follow), not search. Hint: Pass a cursor only to the tool that returned it, with the same arguments; leave it out to start from the first page.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from kg_mcp.errors import InvalidInput

MAX_CURSOR_CHARS = 512
MAX_RESUME_CHARS = 200  # a tool's own resume key (e.g. the last sort key shown), before encoding
_TAG_BYTES = 16  # HMAC-SHA256 truncated: 128 bits cannot be guessed
_HOW = "Pass a cursor only to the tool that returned it, with the same arguments; leave it out to start from the first page."
_PROCESS_KEY = secrets.token_bytes(32)  # when the server has no key of its own


@dataclass(frozen=True)
class Position:
    """Where the next page starts: `offset` rows in, and the tool's own `resume` key if it gave one."""

    offset: int
    resume: str | None = None


def cursor_key(secret: str = "") -> bytes:
    """The signing key for the server's cursor secret (Settings.cursor_key); with none, this
    process's own (a restart ends its cursors)."""
    return hashlib.sha256(b"kg-mcp cursor key\x00" + secret.encode()).digest() if secret else _PROCESS_KEY


def call_digest(tool: str, arguments: dict) -> str:
    """The digest of a call's arguments, `cursor` and `limit`-free: the same call asked for its next
    page digests the same (a page's size may change between pages)."""
    kept = {k: v for k, v in arguments.items() if k not in ("cursor", "limit") and v not in (None, "", [], {})}
    canonical = json.dumps([tool, kept], sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def issue(tool: str, arguments: dict, offset: int, *, key: bytes, resume: str | None = None, stamp: str = "",
          graphs: str = "") -> str:
    """A cursor for the page of `tool`'s call with `arguments` that starts at `offset` (and `resume`).
    `stamp` names the data's state (a cursor read against another is stale); `graphs` the caller's
    graph set (kg_mcp.backends.graph_access.cache_key)."""
    if offset < 0:
        raise ValueError("a cursor's offset is never negative")
    if resume is not None and len(resume) > MAX_RESUME_CHARS:
        raise ValueError(f"a resume key is at most {MAX_RESUME_CHARS} characters")
    body = {"t": tool, "c": call_digest(tool, arguments), "o": offset}
    if resume is not None:
        body["r"] = resume
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    tag = _tag(key, payload, stamp, graphs)
    token = base64.urlsafe_b64encode(payload + tag).decode().rstrip("=")
    if len(token) > MAX_CURSOR_CHARS:
        raise ValueError("a cursor came out longer than MAX_CURSOR_CHARS")
    return token


def read(tool: str, arguments: dict, token: str, *, key: bytes, stamp: str = "", graphs: str = "") -> Position:
    """The position `token` names for this call of `tool`; InvalidInput, in our words, for a token
    that is too long, not one of ours, edited, stale, or issued for another tool or other arguments."""
    if not isinstance(token, str) or len(token) > MAX_CURSOR_CHARS:
        raise InvalidInput(f"This cursor is longer than any cursor kg-mcp issues ({MAX_CURSOR_CHARS} characters).", _HOW)
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (ValueError, TypeError):
        raise InvalidInput("This cursor is not one kg-mcp issued (it is not even in the cursor's alphabet).", _HOW) from None
    payload, tag = raw[:-_TAG_BYTES], raw[-_TAG_BYTES:]
    if len(raw) <= _TAG_BYTES or not hmac.compare_digest(tag, _tag(key, payload, stamp, graphs)):
        raise InvalidInput(
            "This cursor was not issued by this server for the data it reads now: it was changed, comes from "
            "another server, or the KG was reloaded (or the server restarted) since.", _HOW,
        )
    body = json.loads(payload)  # ours: signed above
    if body["t"] != tool:
        raise InvalidInput(f"This cursor was issued by another tool ({body['t']}), not {tool}.", _HOW)
    if body["c"] != call_digest(tool, arguments):
        raise InvalidInput(f"This cursor was issued for a {tool} call with other arguments.", _HOW)
    return Position(int(body["o"]), body.get("r"))


def _tag(key: bytes, payload: bytes, stamp: str, graphs: str) -> bytes:
    signed = b"\x00".join((payload, stamp.encode(), graphs.encode()))
    return hmac.new(key, signed, hashlib.sha256).digest()[:_TAG_BYTES]
