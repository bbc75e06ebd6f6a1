"""A name index is read ahead into the page cache when a server opens it, only when it fits in half
the memory free, and not at all with KG_MCP_WARM_NAME_INDEX=0 (kg_mcp.names.warm)."""

from __future__ import annotations

from kg_mcp.backends import open_store
from kg_mcp.names.warm import available_memory, warm
from kg_mcp.settings import Settings


def _index_file(tmp_path):
    path = tmp_path / "names.sqlite"
    path.write_bytes(b"\0" * (3 * 2**20))  # warm() reads bytes; what they are does not matter
    return path


def test_an_index_that_fits_is_read_through_in_the_background(tmp_path):
    path = _index_file(tmp_path)
    size = path.stat().st_size
    thread = warm(path, available=4 * size)
    assert thread is not None and thread.daemon
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert warm(path, available=size) is None  # more than half of what is free: left on disk
    assert warm(tmp_path / "missing.sqlite", available=4 * size) is None
    assert available_memory() > 0  # read from /proc/meminfo on Linux


def test_the_setting_turns_it_off(metaqa_store_dir):
    backend = open_store(metaqa_store_dir, settings=Settings(warm_name_index=False))
    try:
        assert backend._names.warming is None
    finally:
        backend.close()


def test_opening_a_stores_index_starts_the_read(metaqa_store_dir):
    backend = open_store(metaqa_store_dir, settings=Settings())
    try:
        reading = backend._names.warming
        assert reading is not None  # a 10 MB index fits in any machine's free memory
        reading.join(timeout=30)
        assert not reading.is_alive()
    finally:
        backend.close()
