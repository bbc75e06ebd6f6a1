"""Loads that replace a store all at once: work on a copy beside it, then swap directories.

Layout next to ``DIR``: ``.DIR.loading-PID`` (the copy being loaded), ``.DIR.old-PID`` (the
previous store during the swap), ``.DIR.lock`` (one load at a time). A killed load leaves at most
one of the first two behind, and the next load (or the server, before it opens a store) repairs it.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyoxigraph as ox

from kg_mcp.loading.errors import LoadError

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None

log = logging.getLogger(__name__)


def _sibling(store_dir: Path, kind: str, pid: int) -> Path:
    return store_dir.parent / f".{store_dir.name}.{kind}-{pid}"


def _leftovers(store_dir: Path, kind: str) -> list[tuple[Path, int]]:
    """(path, pid) of the ``kind`` siblings of the store left by processes that are gone."""
    prefix = f".{store_dir.name}.{kind}-"
    found = []
    if store_dir.parent.is_dir():
        for path in store_dir.parent.iterdir():
            pid = path.name[len(prefix) :] if path.name.startswith(prefix) else ""
            if pid.isdigit() and not _alive(int(pid)):
                found.append((path, int(pid)))
    return found


def _alive(pid: int) -> bool:
    # Our own pid is not "alive" here: loads in one process run one after another.
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_dir(path: Path) -> None:
    # Makes the renames durable; best effort where directories cannot be opened.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def recover_interrupted_swap(store_dir: str | Path) -> bool:
    """Undo a swap that a killed load left half done; True if the store was put back.

    With the store missing, the previous one (``.DIR.old-PID`` of a dead process) is renamed
    back; with the store present, such leftovers are finished swaps and are deleted.
    """
    store_dir = Path(store_dir)
    olds = sorted(_leftovers(store_dir, "old"), key=lambda item: item[0].stat().st_mtime)
    restored = False
    if olds and not store_dir.exists():
        path, _ = olds.pop()
        os.rename(path, store_dir)
        _fsync_dir(store_dir.parent)
        log.warning("restored %s from an interrupted load (%s)", store_dir, path.name)
        restored = True
    for path, _ in olds:
        shutil.rmtree(path, ignore_errors=True)
    return restored


def remove_stale_staging(store_dir: str | Path) -> None:
    """Delete the half-loaded copies that killed loads left beside the store."""
    for path, _ in _leftovers(Path(store_dir), "loading"):
        log.info("removing %s left by an interrupted load", path)
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def exclusive_load(store_dir: Path) -> Iterator[None]:
    """Refuse a second concurrent load into the same store (its swap would drop our triples)."""
    if fcntl is None:
        yield
        return
    store_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(store_dir.parent / f".{store_dir.name}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LoadError(store_dir, None, "another load into this store is running") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def staged_store(store_dir: Path) -> Iterator[Path]:
    """A directory to load into: a copy of the store (or nothing yet, for a new one).

    When the block succeeds the copy replaces the store; when it fails in any way the copy is
    deleted and the store is untouched. The caller must have closed its Store on the copy.
    """
    staging = _sibling(store_dir, "loading", os.getpid())
    shutil.rmtree(staging, ignore_errors=True)
    if store_dir.exists():
        _backup(store_dir, staging)
    try:
        yield staging
        _swap_in(staging, store_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _backup(store_dir: Path, staging: Path) -> None:
    # A RocksDB backup hard-links the immutable data files: cheap, and they are never rewritten.
    try:
        store = ox.Store(str(store_dir))
    except OSError as e:
        hint = "; is another process (a kg-mcp server?) using it?" if "lock" in str(e).lower() else ""
        raise LoadError(store_dir, None, f"cannot open the store ({e}){hint}") from e
    try:
        store.backup(str(staging))
    except OSError as e:
        shutil.rmtree(staging, ignore_errors=True)
        raise LoadError(store_dir, None, f"cannot copy the store ({e})") from e
    finally:
        del store  # releases RocksDB's lock before anything else opens the store


def _swap_in(staging: Path, store_dir: Path) -> None:
    if not store_dir.exists():
        os.rename(staging, store_dir)
        _fsync_dir(store_dir.parent)
        return
    old = _sibling(store_dir, "old", os.getpid())
    shutil.rmtree(old, ignore_errors=True)
    os.rename(store_dir, old)
    try:
        os.rename(staging, store_dir)
    except BaseException:
        os.rename(old, store_dir)
        raise
    _fsync_dir(store_dir.parent)
    shutil.rmtree(old, ignore_errors=True)
