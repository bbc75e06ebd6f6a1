"""The page cache, for benches that time reads from disk: a store's files dropped from it, how much
of them it still holds, and what one random read from the disk itself costs.

Dropping is `posix_fadvise(DONTNEED)` on every file, as after a reboot (or a load that filled the
cache with other files): clean pages go, so the files are written out first (`sync`, theirs only:
`os.sync()` would wait for every other process's writes too). What is left is told by `mincore`
on a mapping of each file, which reads nothing. A process's own caches (RocksDB's block cache,
SQLite's page cache) are not the page cache and are not dropped here.

    python -m bench.page_cache DIR     what of DIR's files is cached, then drop it and say again
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import random
import sys
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
READ_SIZE = 4096  # a RocksDB block and a SQLite page are about this size

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident_bytes(path: Path) -> int:
    """How many bytes of the file at `path` the page cache holds (mincore on a read-only mapping)."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb") as file:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, file.fileno(), 0)
        if address in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
        try:
            pages = (size + PAGE - 1) // PAGE
            flags = ctypes.create_string_buffer(pages)
            if _libc.mincore(address, size, flags) != 0:
                raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
            return sum(byte & 1 for byte in flags.raw) * PAGE
        finally:
            _libc.munmap(address, size)


class StoreFiles:
    """Every file of a store directory (its RocksDB files and name indexes), held open so that
    dropping them all from the page cache costs a system call a file."""

    def __init__(self, directory: Path):
        self.paths = sorted(p for p in directory.rglob("*") if p.is_file() and p.stat().st_size)
        self._files = [open(p, "rb", buffering=0) for p in self.paths]  # noqa: SIM115 (closed in close())
        self.size = sum(p.stat().st_size for p in self.paths)

    def sync(self) -> None:
        """Write the files' pages to disk (a load leaves gigabytes on their way), so all can be dropped."""
        for file in self._files:
            os.fdatasync(file.fileno())

    def drop(self) -> None:
        """Drop every file from the page cache (what a process maps stays: `resident` tells)."""
        for file in self._files:
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)

    def resident(self) -> int:
        """Bytes of the store the page cache holds now."""
        return sum(resident_bytes(p) for p in self.paths)

    def random_reads(self, reads: int, seed: int = 7) -> list[float]:
        """Seconds of each of `reads` reads of READ_SIZE bytes at random places in the store's files
        (a file picked in proportion to its size), each from the disk: the files are dropped first
        and told not to read ahead, as RocksDB tells its own."""
        rng = random.Random(seed)
        weights = [p.stat().st_size for p in self.paths]
        seconds = []
        for file in self._files:
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        self.drop()
        for file in rng.choices(self._files, weights, k=reads):
            size = os.fstat(file.fileno()).st_size
            offset = rng.randrange(max(1, size // READ_SIZE)) * READ_SIZE
            started = time.perf_counter()
            os.pread(file.fileno(), READ_SIZE, offset)
            seconds.append(time.perf_counter() - started)
        self.drop()
        for file in self._files:
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_NORMAL)
        return seconds

    def close(self) -> None:
        for file in self._files:
            file.close()

    def __enter__(self) -> StoreFiles:
        return self

    def __exit__(self, *_) -> None:
        self.close()


def main() -> None:
    directory = Path(sys.argv[1])
    with StoreFiles(directory) as files:
        mb = 2**20
        print(f"{directory}: {len(files.paths)} files, {files.size / mb:,.1f} MB, {files.resident() / mb:,.1f} MB cached")
        files.sync()
        files.drop()
        print(f"dropped: {files.resident() / mb:,.1f} MB cached")


if __name__ == "__main__":
    main()
