"""A query-checking process (started by kg_mcp.sparql.parse_pool): `python -m kg_mcp.sparql._parse_worker FD MB`.

It leaves the network (kg_mcp.backends._query_worker.leave_network), limits its address space to
MB megabytes, imports rdflib's parser, says it is ready, then answers (query, policy) requests over
the socket FD with ("ok", fields) (the CheckedQuery's fields, in order: plain strings, numbers and
tuples) or ("error", kind, message, hint), one at a time,
until the socket closes.
"""

from __future__ import annotations

import resource
import sys
from multiprocessing.connection import Connection

from kg_mcp.backends import lifeline
from kg_mcp.backends._query_worker import leave_network
from kg_mcp.errors import KGError


def _serve(conn: Connection, memory_mb: int) -> None:
    isolation_problem = leave_network()
    lifeline.watch(conn.fileno())  # a server that ends, however, takes its checkers with it
    if memory_mb:
        limit = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import rdflib.plugins.sparql.parser  # noqa: F401 - the grammar is built at import: before "ready"

    from kg_mcp.sparql.checked import checked_query

    try:
        conn.send(("ready", isolation_problem))
    except OSError:  # the server went away while this started
        return
    while True:
        try:
            query, policy = conn.recv()
        except (EOFError, OSError):  # the server went away
            return
        try:
            checked = checked_query(query, policy)
            reply = ("ok", checked.fields())
        except KGError as error:
            reply = ("error", type(error).__name__, error.message, error.hint)
        except MemoryError:
            reply = ("error", "InvalidInput", "The query needed too much memory to check.", "Write a shorter query.")
        try:
            conn.send(reply)
        except OSError:  # the server went away
            return


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])), int(sys.argv[2]))
