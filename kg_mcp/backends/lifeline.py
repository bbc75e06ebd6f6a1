"""A worker process ends with the server that started it, however the server ends.

Every worker holds a pipe or a socket whose other end only the server holds: the sparql query
workers (kg_mcp.backends.query_pool) and query checkers (kg_mcp.sparql.parse_pool) their socket
to it, the long-call workers (kg_mcp.tools.processes) the pipe multiprocessing keeps from each to
its parent. The kernel closes the server's end when the server exits, whether it returned,
crashed or was killed with SIGKILL; `watch` waits for that in a thread of the worker and then
kills the worker at once. A worker busy in a query still ends: pyoxigraph lets go of the
interpreter lock while it evaluates one.

The long-call workers are children of multiprocessing's fork server, not of the server, and hold
the fork server's own lifeline (so that it would outlive the server while they run): `forked_worker`
lets go of that, so the fork server exits with the server, and asks the kernel to kill the worker
when the fork server goes (PR_SET_PDEATHSIG), which needs no Python at all.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading

_PR_SET_PDEATHSIG = 1


def watch(fd: int, *, pipe: bool = False) -> None:
    """Kill this process as soon as the other end of `fd` is closed: a connected socket, or with
    `pipe` the read end of a pipe that is never written to again."""
    threading.Thread(target=_wait_for_hangup, args=(fd, pipe), name="kg-mcp lifeline", daemon=True).start()


def _wait_for_hangup(fd: int, pipe: bool) -> None:
    poller = select.poll()
    # POLLRDHUP: the peer closed its end of a socket, without reading what the worker's own loop reads.
    poller.register(fd, select.POLLIN if pipe else select.POLLRDHUP)
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        if any(event & (select.POLLIN | select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL)
               for _, event in events):
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup: what it held was the server's to use


def forked_worker() -> None:
    """In a worker started by multiprocessing's fork server: end with the server (see the module)."""
    import multiprocessing
    from multiprocessing import forkserver

    alive = getattr(forkserver._forkserver, "_forkserver_alive_fd", None)
    if alive is not None:  # the fork server's lifeline: only the server should hold it
        os.close(alive)
        forkserver._forkserver._forkserver_alive_fd = None
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    parent = multiprocessing.parent_process()
    if parent is not None:
        if not parent.is_alive():  # the server went before the line above was drawn
            os.kill(os.getpid(), signal.SIGKILL)
        watch(parent.sentinel, pipe=True)
