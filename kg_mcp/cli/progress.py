"""What `kg-mcp ask` shows people on stderr while it runs: a spinner while the model thinks and a
line per tool call with its row count. stdout keeps only the answer.

It listens to the run's trace events (kg_mcp.agents.trace), so every method reports alike.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Progress:
    """A trace listener. The spinner turns only on a terminal; elsewhere each step is one plain line."""

    def __init__(self, stream: TextIO | None = None, *, spin: bool | None = None, interval: float = 0.1):
        self.stream = stream or sys.stderr
        self.spin = self.stream.isatty() if spin is None else spin
        self.interval = interval
        self._lock = threading.Lock()
        self._spinning: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._calls: dict[str, str] = {}
        self._turns = 0

    def __call__(self, record: dict[str, Any]) -> None:
        kind = record["type"]
        if kind == "model_request":
            self._turns += 1
            role = record.get("role", "model")
            self._start(f"{record.get('model', role)} is thinking (turn {self._turns})")
        elif kind == "model_reply":
            self._stop()
            calls = len(record.get("tool_calls") or [])
            if not self.spin:
                self._line(f"model turn {self._turns}: {calls} tool call{'s' * (calls != 1)}" if calls
                           else f"model turn {self._turns}: replied")
        elif kind == "tool_call":
            self._calls[record["tool"]] = call_text(record["tool"], record.get("arguments") or {})
        elif kind == "tool_result":
            shown = self._calls.pop(record["tool"], record["tool"])
            self._line(f"  {shown} -> {result_text(record)} ({record.get('seconds', 0):.2f} s)")
        elif kind == "final":
            self._stop()

    def close(self) -> None:
        self._stop()

    def _line(self, text: str) -> None:
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _start(self, label: str) -> None:
        self._stop()
        if not self.spin:
            return
        stop = self._spinning = threading.Event()

        def turn() -> None:
            started, frame = time.monotonic(), 0
            while not stop.is_set():
                with self._lock:
                    self.stream.write(f"\r{FRAMES[frame % len(FRAMES)]} {label} {time.monotonic() - started:.0f} s ")
                    self.stream.flush()
                frame += 1
                stop.wait(self.interval)
            with self._lock:  # leave the line empty for what comes next
                self.stream.write("\r\033[K")
                self.stream.flush()

        self._thread = threading.Thread(target=turn, name="kg-mcp-spinner", daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        if self._spinning is not None:
            self._spinning.set()
            self._thread.join()
            self._spinning = self._thread = None


def call_text(tool: str, arguments: dict[str, Any]) -> str:
    """`search(entity=wd:Q42, direction=outgoing)`, cut to a line."""
    shown = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    text = f"{tool}({shown})"
    return text if len(text) <= 90 else text[:87] + "...)"


def result_text(record: dict[str, Any]) -> str:
    """'12 rows', or the error's first line."""
    if record.get("is_error"):
        return "error: " + (record.get("text") or "").strip().split("\n")[0][:100]
    rows = row_count(record.get("data"))
    return "done" if rows is None else f"{rows} row{'s' * (rows != 1)}"


def row_count(data: Any) -> int | None:
    """Rows in a tool's structured content: its `total`, else the size of its first list (summing
    the lists' own totals, as explore_kg reports per relation)."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("total"), int):
        return data["total"]
    for value in data.values():
        if isinstance(value, list):
            totals = [item.get("total") for item in value if isinstance(item, dict)]
            if value and all(isinstance(t, int) for t in totals) and len(totals) == len(value):
                return sum(totals)
            return len(value)
    return None
