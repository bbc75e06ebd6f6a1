"""The stdio transport with stdin and stdout served by the event loop.

Read by the event loop, stdin lets Ctrl-C stop the server at once; written by it, stdout costs no
thread hand-off per message (the SDK writes each message through a worker thread, two wake-ups
that each wait for a free core on a busy machine).
"""

from __future__ import annotations

import logging

import anyio
from mcp.server import MCPServer

log = logging.getLogger(__name__)


async def serve_stdio(server: MCPServer) -> None:
    """The SDK's stdio transport, with stdin read by the event loop where it can be.

    The SDK reads stdin in a worker thread that cancellation cannot stop, so after Ctrl-C the
    server waited for one more input line (or EOF) before it exited. Read by the event loop, a
    pipe or terminal lets Ctrl-C end the server at once. Elsewhere (stdin is a regular file,
    /dev/null, a socket; no /proc) the SDK reads stdin itself.
    """
    from mcp.server.stdio import stdio_server

    lowlevel = getattr(server, "_lowlevel_server", None)
    stdin = await _EventLoopStdin.open() if lowlevel is not None else None
    if stdin is None:
        await server.run_stdio_async()
        return
    stdout = await _EventLoopStdout.open()  # None: the SDK writes stdout itself
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_end_input_on_ctrl_c, stdin, group.cancel_scope)
            async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
            group.cancel_scope.cancel()  # input ended: stop watching for Ctrl-C
    finally:
        stdin.close()
        if stdout is not None:
            await stdout.aclose()


async def _end_input_on_ctrl_c(stdin: _EventLoopStdin, scope: anyio.CancelScope) -> None:
    """Ctrl-C (SIGINT) ends the input, so the server stops as it does at EOF; a second one cancels all."""
    import signal

    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            if stdin.ended:
                scope.cancel()
                return
            log.info("interrupted: stopping as at the end of input")
            stdin.end()


class _EventLoopStdin:
    """stdin's lines, read by the event loop (cancellable), for the SDK's stdio_server."""

    MAX_LINE = 1 << 28  # longer lines are dropped (the SDK then answers nothing for them)

    def __init__(self, reader, transport, saved_fd: int):
        self.reader, self.transport, self.saved_fd = reader, transport, saved_fd
        self.ended = False

    def end(self) -> None:
        """No more lines: the reader sees the end of input."""
        self.ended = True
        self.reader.feed_eof()

    @classmethod
    async def open(cls) -> _EventLoopStdin | None:
        import asyncio
        import os

        import stat

        try:
            mode = os.fstat(0).st_mode
            if not (stat.S_ISFIFO(mode) or (stat.S_ISCHR(mode) and os.isatty(0))):
                return None  # a file, /dev/null, a socket: the SDK's reader (they end, or are rare)
            # A file description of our own: the non-blocking flag set on it does not reach the
            # terminal or pipe end that fd 0 shares with the parent process.
            fd = os.open("/proc/self/fd/0", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        pipe = os.fdopen(fd, "rb", buffering=0)
        try:
            reader = asyncio.StreamReader(limit=cls.MAX_LINE)
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe
            )
        except (OSError, ValueError):  # not a pipe or terminal the event loop can watch
            pipe.close()
            return None
        # As the SDK does: while serving, fd 0 reads the null device, so nothing else eats the protocol.
        saved_fd = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        return cls(reader, transport, saved_fd)

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        if self.ended:
            raise StopAsyncIteration
        try:
            line = await self.reader.readline()
        except ValueError:  # a line past MAX_LINE: dropped
            return "\n"
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")

    def close(self) -> None:
        import os

        self.transport.close()
        os.dup2(self.saved_fd, 0)
        os.close(self.saved_fd)


class _EventLoopStdout:
    """stdout written by the event loop (a pipe only); fd 1 points at stderr meanwhile, as the SDK does."""

    def __init__(self, writer, saved_fd: int):
        self.writer, self.saved_fd = writer, saved_fd

    @classmethod
    async def open(cls) -> _EventLoopStdout | None:
        import asyncio
        import os
        import stat

        try:
            if not stat.S_ISFIFO(os.fstat(1).st_mode):
                return None
            # A file description of our own, so the non-blocking flag stays ours.
            fd = os.open("/proc/self/fd/1", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        pipe = os.fdopen(fd, "wb", buffering=0)
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
        except (OSError, ValueError):
            pipe.close()
            return None
        saved_fd = os.dup(1)
        os.dup2(2, 1)  # stray prints go to stderr, never into the protocol
        return cls(asyncio.StreamWriter(transport, protocol, None, loop), saved_fd)

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self.writer.drain()

    async def aclose(self) -> None:
        import asyncio
        import os

        transport = self.writer.transport
        for _ in range(500):  # let the last answers reach the pipe (at most 5 s)
            if transport.is_closing() or not transport.get_write_buffer_size():
                break
            await asyncio.sleep(0.01)
        transport.close()
        os.dup2(self.saved_fd, 1)
        os.close(self.saved_fd)
