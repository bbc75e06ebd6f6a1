"""A query worker process (started by kg_mcp.backends.query_pool): `python -m kg_mcp.backends._query_worker FD`.

It talks over the socket FD: first (path, nquads) to open the store, then (query, row_cap)
requests, each answered with (status, payload) in plain data. It exits when the socket closes.

A worker first leaves the network: it moves into a network namespace of its own, which holds
only a loopback interface that is down, so no query (a SERVICE call the checks missed) can reach
any address. The socket to the server was opened before and keeps working.
"""

from __future__ import annotations

import ctypes
import os
import sys
from multiprocessing.connection import Connection

from kg_mcp.backends._rows import capped_rows
from kg_mcp.backends.query_pool import StoreSource, plain

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


def leave_network() -> str | None:
    """Move this process into a new, empty network namespace; why it could not, or None.

    Root may create one directly. Others create a user namespace with it (the kernel allows that
    only while the process has a single thread: call this before opening the store, whose engine
    starts threads), mapping their own ids so that files keep their owners."""
    if not sys.platform.startswith("linux"):
        return "network namespaces exist only on Linux"
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWNET if uid == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(flags) != 0:
            return f"unshare failed: {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as e:
        return f"unshare is unavailable: {e}"
    if uid != 0:
        try:
            maps = (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1"))
            for name, text in maps:
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        except OSError:
            pass  # unmapped ids read as 'nobody' here, but file access still uses the real ones
    return None


def _serve(conn: Connection) -> None:
    """A worker's life: open the store, then answer (query, row_cap) requests until the pipe closes."""
    isolation_problem = leave_network()
    path, nquads = conn.recv()
    try:
        store = StoreSource(path, nquads).open()
    except OSError as e:
        conn.send(("failed", str(e)))
        return
    conn.send(("ready", isolation_problem))
    while True:
        try:
            query, row_cap = conn.recv()
        except (EOFError, OSError):  # the server went away
            return
        try:
            rows = capped_rows(store.query(query), row_cap)
            reply = ("ok", (rows.variables, [[plain(v) for v in row] for row in rows.rows], rows.total, rows.boolean))
        except SyntaxError as e:
            reply = ("syntax", str(e))
        except OSError as e:
            reply = ("store", str(e))
        conn.send(reply)


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])))
