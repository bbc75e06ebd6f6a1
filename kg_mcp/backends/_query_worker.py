"""A query worker process (started by kg_mcp.backends.query_pool): `python -m kg_mcp.backends._query_worker FD`.

It talks over the socket FD: first (path, nquads) to open the store, then (query, row_cap, graphs)
requests (graphs: the named graphs that are the query's whole dataset, or None), each answered
with (status, payload) in plain data, bounded in size (`shipped`). It exits when the socket closes,
in the middle of a query too (kg_mcp.backends.lifeline).

A worker first leaves the network: it moves into a network namespace of its own, which holds
only a loopback interface that is down, so no query (a SERVICE call the checks missed) can reach
any address. The socket to the server was opened before and keeps working.
"""

from __future__ import annotations

import ctypes
import os
import sys
from multiprocessing.connection import Connection

import pyoxigraph as ox

from kg_mcp.backends import lifeline
from kg_mcp.backends._rows import capped_rows
from kg_mcp.backends.query_pool import StoreSource, plain

# What a worker ships of an answer: no tool output shows more than 60,000 characters (the default
# KG_MCP_MAX_OUTPUT_CHARS), so a value is cut at a third of that (a cut one still fits a structured
# answer, with the note that says so), and the rows at about 1 MB of text.
VALUE_CHARS = 20_000
ANSWER_CHARS = 1_048_576
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
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


def shipped(rows: list[list]) -> list[list]:
    """Rows as plain data, bounded before they cross to the server: a value past VALUE_CHARS is cut
    and says so, and rows past ANSWER_CHARS in all stay here (the total still counts them, so the
    tool says the answer was cut). A 200 MB literal built by a query costs the server nothing.

    >>> import pyoxigraph as ox
    >>> [[cut]] = shipped([[ox.Literal("x" * 100_000)]])
    >>> len(cut[1]) < 20_100, cut[1].endswith("[cut by kg-mcp: 100,000 characters in all]")
    (True, True)
    >>> len(shipped([[ox.Literal("y" * 20_000)]] * 100))
    52
    """
    out, size = [], 0
    for row in rows:
        values = [_bounded(plain(v)) for v in row]
        size += sum(_chars(v) for v in values)
        if out and size > ANSWER_CHARS:
            break
        out.append(values)
    return out


def _bounded(data):
    """A plain term whose text fits VALUE_CHARS; a longer one becomes a literal cut at that, marked."""
    if data is None or data[0] == "b":
        return data
    if data[0] == "t":
        return ("t", *(_bounded(part) for part in data[1:]))
    text = data[1]
    if len(text) <= VALUE_CHARS:
        return data
    language = data[3] if data[0] == "l" else None
    return ("l", f"{text[:VALUE_CHARS]}… [cut by kg-mcp: {len(text):,} characters in all]", _XSD_STRING, language)


def _chars(data) -> int:
    if data is None:
        return 4
    if data[0] == "t":
        return sum(_chars(part) for part in data[1:])
    return len(data[1])


def dataset(graphs: list[str] | None) -> dict:
    """Store.query's arguments that make `graphs` a query's whole dataset: its default graph their
    union, GRAPH ranging over them only. They override whatever FROM / FROM NAMED the text holds, so
    neither the store's default graph nor any other graph can be read (None: the store as it is)."""
    if graphs is None:
        return {}
    named = [ox.NamedNode(g) for g in graphs]
    return {"default_graph": named, "named_graphs": named}


def _serve(conn: Connection) -> None:
    """A worker's life: open the store, then answer (query, row_cap, graphs) requests until the pipe closes."""
    isolation_problem = leave_network()
    lifeline.watch(conn.fileno())  # a server that ends, however, takes its workers with it
    path, nquads = conn.recv()
    try:
        store = StoreSource(path, nquads).open()
    except OSError as e:
        conn.send(("failed", str(e)))
        return
    try:
        conn.send(("ready", isolation_problem))
    except OSError:  # the server went away while this started
        return
    while True:
        try:
            query, row_cap, graphs = conn.recv()
        except (EOFError, OSError):  # the server went away
            return
        try:
            rows = capped_rows(store.query(query, **dataset(graphs)), row_cap)
            reply = ("ok", (rows.variables, shipped(rows.rows), rows.total, rows.boolean))
        except SyntaxError as e:
            reply = ("syntax", str(e))
        except OSError as e:
            reply = ("store", str(e))
        conn.send(reply)


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])))
