"""The audit log (`--audit-log FILE`): one JSON line per call (`kg-mcp audit` reads them back:
kg_mcp.serving.audit_trail).

A line says when, who (the subject, the client id, the per-caller key), what (a tool, resource or
prompt and the graphs it could read), how much (the arguments' size and their SHA-256, never the
arguments themselves, never a token), the outcome (ok, tool_error, refused, or the HTTP 401/403 of a
request turned away before it reached the server), rows returned and milliseconds:

    {"time": "2026-11-28T10:02:03.412Z", "subject": "alice", "client_id": "vscode", "caller": "sub:alice",
     "kind": "tool", "name": "search", "graphs": ["http://example.org/graph/movies"], "arg_bytes": 41,
     "arg_sha256": "5d1c...", "outcome": "ok", "rows": 12, "ms": 3.1}

`graphs` is null where the caller reads everything the server serves. The file is bounded: past
`max_bytes` it is renamed FILE.1 (FILE.1 to FILE.2, ...) and a new one started, `backups` kept
(the standard library's RotatingFileHandler does the turning).

Instead of a file, the lines can go where a platform's log shipper reads them (`open_audit`):
`stderr`, `stdout` (HTTP transports only: over stdio it carries the protocol) or `journald`, the
systemd journal, by its native protocol: each line is the entry's MESSAGE, with
SYSLOG_IDENTIFIER=kg-mcp-audit and the subject, name and outcome as fields of their own
(`journalctl -t kg-mcp-audit -o cat` prints the lines back, for `kg-mcp audit -`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import logging.handlers
import socket
import struct
import sys
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from kg_mcp.calls.caller import Caller
from kg_mcp.errors import ConfigError

MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 5
# The list in each tool's structured content whose length is the call's rows.
ROW_LISTS = ("rows", "entities", "relations", "triples", "claims")


JOURNAL_SOCKET = "/run/systemd/journal/socket"


def open_audit(target: str, *, transport: str = "http") -> AuditLog:
    """The audit log `--audit-log TARGET` names: a file, or stdout, stderr or journald."""
    if target == "stdout" and transport == "stdio":
        raise ConfigError("--audit-log stdout needs --transport http or sse: over stdio, stdout carries the protocol. "
                          "Give stderr, journald or a file.")
    if target == "journald":
        return AuditLog(handler=JournalHandler(JOURNAL_SOCKET), name="journald")
    if target in ("stdout", "stderr"):
        return AuditLog(handler=logging.StreamHandler(getattr(sys, target)), name=target)
    return AuditLog(target)


class AuditLog:
    """Appends audit lines to `path`, rotating it past `max_bytes`, or hands them to `handler`
    (a stream, the journal); safe from several threads."""

    def __init__(self, path: str | Path | None = None, *, max_bytes: int = MAX_BYTES, backups: int = BACKUPS,
                 handler: logging.Handler | None = None, name: str | None = None):
        self.path = Path(path) if path is not None else None
        if handler is None:
            try:
                handler = logging.handlers.RotatingFileHandler(
                    self.path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
                )
            except OSError as e:
                raise ConfigError(f"Cannot open the audit log {self.path}: {e.strerror}") from None
        handler.setFormatter(logging.Formatter("%(message)s"))
        self._handler = handler
        # A logger of its own, outside the "kg_mcp" tree, so no line of it ever reaches the server's log.
        self._logger = logging.Logger(f"kg-mcp-audit:{name or self.path}")
        self._logger.addHandler(handler)
        self._logger.propagate = False

    def call(
        self,
        caller: Caller,
        kind: str,
        name: str,
        arguments: dict | None,
        outcome: str,
        *,
        rows: int | None = None,
        ms: float,
        graphs: Iterable[str] | None = None,
    ) -> None:
        data = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), default=str).encode()
        self._write(
            {
                "subject": caller.subject,
                "client_id": caller.client_id,
                "caller": caller.key,
                "kind": kind,
                "name": name,
                "graphs": sorted(graphs) if graphs is not None else None,
                "arg_bytes": len(data),
                "arg_sha256": hashlib.sha256(data).hexdigest(),
                "outcome": outcome,
                "rows": rows,
                "ms": round(ms, 1),
            }
        )

    def refused(self, status: int, *, subject: str | None, client_id: str | None, caller: str) -> None:
        """A request the HTTP layer turned away (401: no valid token, 403: too few scopes)."""
        self._write(
            {"subject": subject, "client_id": client_id, "caller": caller, "kind": "http", "name": None,
             "outcome": str(status)}
        )

    def _write(self, fields: dict) -> None:
        stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self._logger.info(json.dumps({"time": stamp, **fields}, ensure_ascii=False), extra={"audit": fields})

    def close(self) -> None:
        self._handler.close()


class JournalHandler(logging.Handler):
    """Sends each record to the systemd journal over its socket (the journal's native protocol:
    one datagram of FIELD=value lines, a value holding a newline written as FIELD, its length as
    8 bytes little-endian, then the value)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        # Not connected: each record is sent to the path, so a journal restarted (a package upgrade
        # does that) gets the next one, where a connected socket would keep its dead peer.
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            probe.connect(path)
        except OSError as e:
            self._socket.close()
            raise ConfigError(f"--audit-log journald: no systemd journal at {path} ({e.strerror}); "
                              "give a file, stdout or stderr instead.") from None
        finally:
            probe.close()

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "audit", {})
        entry = {"MESSAGE": self.format(record), "PRIORITY": "6", "SYSLOG_IDENTIFIER": "kg-mcp-audit",
                 "KG_MCP_SUBJECT": fields.get("subject"), "KG_MCP_NAME": fields.get("name"),
                 "KG_MCP_OUTCOME": fields.get("outcome")}
        try:
            datagram = b"".join(_journal_field(k, str(v)) for k, v in entry.items() if v is not None)
            self._socket.sendto(datagram, self.path)
        except OSError:
            self.handleError(record)

    def close(self) -> None:
        self._socket.close()
        super().close()


def _journal_field(name: str, value: str) -> bytes:
    data = value.encode()
    if b"\n" in data:
        return name.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
    return name.encode() + b"=" + data + b"\n"


def rows_of(structured: dict | None) -> int | None:
    """The number of rows in a tool's structured content (None when it has no such list).

    >>> rows_of({"entity": {}, "rows": [1, 2, 3]}), rows_of({"claims": [1]}), rows_of(None)
    (3, 1, None)
    """
    if not isinstance(structured, dict):
        return None
    for key in ROW_LISTS:
        if isinstance(structured.get(key), list):
            return len(structured[key])
    return None


class Timer:
    """Milliseconds since it was made."""

    def __init__(self):
        self.start = time.perf_counter()

    @property
    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000


