"""A query worker process (started by kg_mcp.backends.query_pool): `python -m kg_mcp.backends._query_worker FD`.

It talks over the socket FD: first (path, nquads) to open the store, then (query, row_cap)
requests, each answered with (status, payload) in plain data. It exits when the socket closes.
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection

from kg_mcp.backends._rows import capped_rows
from kg_mcp.backends.query_pool import StoreSource, plain


def _serve(conn: Connection) -> None:
    """A worker's life: open the store, then answer (query, row_cap) requests until the pipe closes."""
    path, nquads = conn.recv()
    try:
        store = StoreSource(path, nquads).open()
    except OSError as e:
        conn.send(("failed", str(e)))
        return
    conn.send(("ready", None))
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
