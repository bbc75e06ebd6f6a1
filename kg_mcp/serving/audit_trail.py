"""`kg-mcp audit`: the audit lines of one server or of a whole team, read back in time order, and
their summary per caller and tool.

Each replica of a team writes its own log (kg_mcp.serving.audit); `audit_trail` takes them all,
as files (each with its rotated FILE.1, FILE.2, ...), folders of them, or glob patterns, and
merges their lines by time into one trail. Each file is in time order already, so the merge reads
them side by side and never holds more than a line of each.
"""

from __future__ import annotations

import glob
import heapq
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from kg_mcp.errors import ConfigError


def audit_lines(path: str | Path) -> Iterator[dict]:
    """Every line of the log at `path` and of its rotated files, oldest first; lines that are not
    JSON objects (a line cut short by a crash) are skipped."""
    path = Path(path)
    rotated = _rotated(path)
    if not path.exists() and not rotated:
        raise ConfigError(f"No audit log at {path}.")
    for file in [*rotated, path] if path.exists() else rotated:
        with open(file, encoding="utf-8", errors="replace") as f:
            yield from _entries(f)


def audit_trail(sources: Iterable[str]) -> Iterator[dict]:
    """The lines of every log `sources` name, merged by time (oldest first). A source is a log file
    (with its rotated files), a folder (every log in it), a glob pattern, or `-` (lines on stdin,
    e.g. from `journalctl -t kg-mcp-audit -o cat`). A folder is read whole: keep other files out of it."""
    streams = []
    for log in _logs(sources):
        streams.append(_entries(sys.stdin) if log == "-" else audit_lines(log))
    return heapq.merge(*streams, key=lambda entry: str(entry.get("time", "")))


def _logs(sources: Iterable[str]) -> list[str]:
    """The logs (without their rotated files) that `sources` name, each once, in the order given."""
    found: list[str] = []
    for source in sources:
        path = Path(source)
        if source == "-":
            named = ["-"]
        elif path.is_dir():
            named = sorted({str(_base(p)) for p in path.iterdir() if p.is_file()})
        elif path.exists() or _rotated(path):
            named = [source]
        else:
            named = sorted({str(_base(Path(p))) for p in glob.glob(source) if Path(p).is_file()})
        if not named:
            raise ConfigError(f"No audit log at {source} (a file, a folder of logs, or a pattern such as 'audit-*.jsonl').")
        found += [log for log in named if log not in found]
    return found


def _rotation(path: Path) -> bool:
    """Whether `path` is a rotated file: NAME.1, NAME.2, ..."""
    return path.suffix[1:].isdigit() and bool(path.stem)


def _base(path: Path) -> Path:
    return path.with_suffix("") if _rotation(path) else path


def _rotated(path: Path) -> list[Path]:
    """`path`'s rotated files, oldest first."""
    files = [p for p in path.parent.glob(glob.escape(path.name) + ".*") if p.suffix[1:].isdigit()]
    return sorted(files, key=lambda p: int(p.suffix[1:]), reverse=True)


def _entries(lines: Iterable[str]) -> Iterator[dict]:
    for line in lines:
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
