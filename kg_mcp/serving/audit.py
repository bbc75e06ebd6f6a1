"""The audit log (`--audit-log FILE`): one JSON line per call, and `kg-mcp audit FILE`'s summary.

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
"""

from __future__ import annotations

import hashlib
import json
import logging
import logging.handlers
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

from kg_mcp.calls.caller import Caller
from kg_mcp.errors import ConfigError

MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 5
# The list in each tool's structured content whose length is the call's rows.
ROW_LISTS = ("rows", "entities", "relations", "triples", "claims")


class AuditLog:
    """Appends audit lines to `path`, rotating it past `max_bytes`; safe from several threads."""

    def __init__(self, path: str | Path, *, max_bytes: int = MAX_BYTES, backups: int = BACKUPS):
        self.path = Path(path)
        try:
            handler = logging.handlers.RotatingFileHandler(
                self.path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
            )
        except OSError as e:
            raise ConfigError(f"Cannot open the audit log {self.path}: {e.strerror}") from None
        handler.setFormatter(logging.Formatter("%(message)s"))
        self._handler = handler
        # A logger of its own, outside the "kg_mcp" tree, so no line of it ever reaches stderr.
        self._logger = logging.Logger(f"kg-mcp-audit:{self.path}")
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
        self._logger.info(json.dumps({"time": stamp, **fields}, ensure_ascii=False))

    def close(self) -> None:
        self._handler.close()


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


# --- kg-mcp audit FILE ---------------------------------------------------------------------------


def audit_lines(path: str | Path) -> Iterator[dict]:
    """Every line of the log at `path` and of its rotated files, oldest first; lines that are not
    JSON objects (a line cut short by a crash) are skipped."""
    path = Path(path)
    rotated = sorted(
        (p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit()),
        key=lambda p: int(p.suffix[1:]),
        reverse=True,
    )
    if not path.exists() and not rotated:
        raise ConfigError(f"No audit log at {path}.")
    for file in [*rotated, path] if path.exists() else rotated:
        with open(file, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    yield entry


def summarise(lines: Iterable[dict]) -> list[dict]:
    """Calls, errors and time per (subject, name), the busiest first. Requests turned away at the
    HTTP layer count under the name "(401)" / "(403)"; callers without a subject go by their key."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for entry in lines:
        who = entry.get("subject") or entry.get("caller") or "?"
        what = entry.get("name") or f"({entry.get('outcome')})"
        groups[(who, what)].append(entry)
    table = []
    for (who, what), entries in groups.items():
        times = [e["ms"] for e in entries if isinstance(e.get("ms"), (int, float))]
        outcomes = [e.get("outcome") for e in entries]
        table.append(
            {
                "subject": who,
                "name": what,
                "calls": len(entries),
                "errors": sum(o == "tool_error" for o in outcomes),
                "refused": sum(o in ("refused", "401", "403") for o in outcomes),
                "rows": sum(e.get("rows") or 0 for e in entries),
                "ms_total": round(sum(times), 1),
                "ms_median": round(statistics.median(times), 1) if times else None,
                "ms_max": round(max(times), 1) if times else None,
                "first": entries[0].get("time"),
                "last": entries[-1].get("time"),
            }
        )
    table.sort(key=lambda row: (-row["calls"], row["subject"], row["name"]))
    return table


def summary_text(table: list[dict]) -> str:
    """The summary as an aligned plain-text table."""
    if not table:
        return "No calls in the audit log."
    head = ["subject", "name", "calls", "errors", "refused", "rows", "ms total", "ms median", "ms max"]
    keys = ["subject", "name", "calls", "errors", "refused", "rows", "ms_total", "ms_median", "ms_max"]
    cells = [head] + [["" if row[k] is None else str(row[k]) for k in keys] for row in table]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    span = f"{table and min(r['first'] or '' for r in table)} to {max(r['last'] or '' for r in table)}"
    return "\n".join(lines) + f"\n{sum(r['calls'] for r in table)} calls, {span}"
