"""A name index read into the page cache when it is opened, in the background.

A lookup reads a few dozen pages scattered over the index. At 100M triples the index is 3 GB, and
a server started after a load or a reboot finds most of it on disk: each lookup then waits for
those reads (6 ms a name, against 0.3 ms once the file is cached). Reading the file through once,
in order, takes seconds and brings every later lookup to cached speed. It is done only when the
file fits easily in the memory the system has free, so it never pushes out what others need, and
only where settings.warm_name_index asks for it (the server's process, not its workers).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

WARM_SHARE = 0.5  # read in only an index of at most this share of the memory available
_CHUNK = 4 * 2**20


def available_memory() -> int | None:
    """Bytes of memory the system can give without swapping (Linux's MemAvailable), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def warm(path: str | Path, available: int | None = None) -> threading.Thread | None:
    """Start reading `path` through in a background thread; None when it would not fit
    (`available`: memory free, read from the system when None)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return None
    available = available_memory() if available is None else available
    if available is None or size > available * WARM_SHARE:
        return None
    thread = threading.Thread(target=_read_through, args=(str(path),), name="kg-mcp-warm-names", daemon=True)
    thread.start()
    return thread


def _read_through(path: str) -> None:
    try:
        with open(path, "rb", buffering=0) as index:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(index.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            chunk = bytearray(_CHUNK)
            while index.readinto(chunk):  # the GIL is let go during each read
                pass
    except OSError as error:
        log.debug("name index %s not read ahead: %s", path, error)
