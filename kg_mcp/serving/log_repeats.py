"""A logging filter that lets one line per kind of message through per interval, then says how many
it held back: a flood of clients (refused connections, timed-out sockets, failed accepts) must not
become a flood of the log."""

from __future__ import annotations

import logging
import re
import threading
import time

# Numbers, hex ids and quoted values vary between lines of the same kind.
_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|[0-9a-fA-F]{8,}|\d+")


class RepeatedLogFilter(logging.Filter):
    """Pass the first record of each kind (logger, level, message shape) per `interval_s`; count the rest
    and note the count on the next record of that kind that passes."""

    MAX_KINDS = 1000

    def __init__(self, interval_s: float = 10.0, clock=time.monotonic):
        super().__init__()
        self.interval_s = interval_s
        self.clock = clock
        self.kinds: dict[tuple, list] = {}  # kind -> [window start, held back]
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, _VARYING.sub("#", str(record.msg))[:200])
        now = self.clock()
        with self.lock:
            seen = self.kinds.get(kind)
            if seen is not None and now - seen[0] < self.interval_s:
                seen[1] += 1
                return False
            held = seen[1] if seen else 0
            if len(self.kinds) >= self.MAX_KINDS and seen is None:
                self.kinds.pop(next(iter(self.kinds)))
            self.kinds[kind] = [now, 0]
        if held:
            record.msg = f"{record.getMessage()} (and {held} more like it since the last one shown)"
            record.args = None
        return True


def install(handlers, interval_s: float = 10.0) -> RepeatedLogFilter:
    """Put one shared filter on each handler (handlers see the records of every logger below them)."""
    shared = RepeatedLogFilter(interval_s)
    for handler in handlers:
        if not any(isinstance(f, RepeatedLogFilter) for f in handler.filters):
            handler.addFilter(shared)
    return shared
