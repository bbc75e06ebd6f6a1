"""What goes wrong in a load: a LoadError names the file and line; BadLines applies --skip-bad."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


class LoadError(Exception):
    """A source that cannot be loaded: which file, which line (when known) and why.

    ``str()`` reads like ``kb.txt:17: expected 3 fields separated by '|' or TAB, got 2``.
    """

    def __init__(self, path: str | Path | None, line: int | None, reason: str):
        # Positional args to Exception keep the error picklable (multiprocessing, pytest-xdist).
        super().__init__(path, line, reason)
        self.path = Path(path) if path is not None else None
        self.line = line
        self.reason = reason

    def __str__(self) -> str:
        where = (
            "" if self.path is None else f"{self.path}:" if self.line is None else f"{self.path}:{self.line}:"
        )
        return f"{where} {self.reason}" if where else self.reason


class BadLines:
    """Malformed lines of a load: raised at once, or, with skip_bad, counted with a few examples kept."""

    MAX_EXAMPLES = 5

    def __init__(self, skip: bool):
        self.skip = skip
        self.count = 0
        self.examples: list[str] = []

    def handle(self, error: LoadError) -> None:
        """Raise ``error``, or record it when bad lines are being skipped."""
        if not self.skip:
            raise error
        self.count += 1
        if len(self.examples) < self.MAX_EXAMPLES:
            self.examples.append(str(error))
            log.warning("skipped %s", error)
