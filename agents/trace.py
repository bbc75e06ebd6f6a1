"""One JSON-lines trace per run: every model request and reply, tool call and result, and the end.

Each line is an event `{"t": seconds since start, "type": ..., ...}`. Types:
`start`, `model_request`, `model_reply`, `tool_call`, `tool_result`, `note` (a driver's rule
firing: a retry, a context reset, a rollback...), `final`. A reader can replay what the agent
saw: a request carries the full message list sent to the model.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from collections.abc import Callable
from typing import IO, Any


class Trace:
    """The events of one run, written as they happen; `listener` (if any) sees each one too."""

    def __init__(self, path: str | Path | None = None, *, listener: Callable[[dict[str, Any]], None] | None = None):
        self.path = Path(path) if path else None
        self.listener = listener
        self._file: IO[str] | None = None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", encoding="utf-8")
        self._started = time.perf_counter()
        self.events: list[dict[str, Any]] = []

    def event(self, type_: str, **data: Any) -> None:
        record = {"t": round(time.perf_counter() - self._started, 4), "type": type_, **data}
        self.events.append(record)
        if self.listener is not None:
            self.listener(record)
        if self._file:
            self._file.write(json.dumps(record, ensure_ascii=False, default=_plain) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None


def _plain(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    return str(value)


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The events of a trace file, in order."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
