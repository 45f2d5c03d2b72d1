"""The stdio transport without worker threads.

The SDK's ``stdio_server()`` reads stdin and writes stdout through anyio file
wrappers, i.e. a worker-thread hop for every line in and every line out. Here the
same transport is fed by asyncio pipe readers and writers on the event loop (the
SDK accepts explicit streams), which cuts the per-call cost of the server by about
a third. Framing, decoding (invalid UTF-8 is replaced, as the SDK does) and
JSON-RPC parsing stay the SDK's own.

Like the SDK, the wire is moved off fds 0 and 1 while serving: stray reads get EOF
and stray prints go to stderr instead of corrupting the protocol stream.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["MAX_LINE_BYTES", "PipeLines", "PipeWriter", "run_stdio"]

MAX_LINE_BYTES = 256 * 1024 * 1024  # one JSON-RPC message; a 1 MB turn is far below


class PipeLines:
    """Async iterator of decoded lines, as the SDK expects from ``stdin``."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as ex:
            line = ex.partial
        except asyncio.LimitOverrunError as ex:
            # A line over the limit cannot be a valid message: drop it, keep serving.
            await self.reader.readexactly(ex.consumed)
            return "\n"
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class PipeWriter:
    """``write``/``flush`` over an asyncio pipe, as the SDK expects from ``stdout``."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self.writer.drain()


def _is_pipe_like(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def _open_pipes() -> tuple[PipeLines, PipeWriter] | None:
    """Private duplicates of fds 0 and 1 as asyncio pipes; None if they are not pipes."""
    if sys.platform == "win32" or not (_is_pipe_like(0) and _is_pipe_like(1)):
        return None
    loop = asyncio.get_running_loop()
    in_fd, out_fd = os.dup(0), os.dup(1)
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(in_fd, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    # Divert the standard descriptors, as the SDK does.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return PipeLines(reader), PipeWriter(writer)


async def run_stdio(server: Any) -> None:
    """Serve an ``MCPServer`` over stdio (falls back to the SDK's transport)."""
    from mcp.server.stdio import stdio_server

    pipes = await _open_pipes()
    if pipes is None:
        await server.run_stdio_async()
        return
    lowlevel = server._lowlevel_server  # the SDK offers no public hook for custom streams
    async with stdio_server(*pipes) as (read_stream, write_stream):  # type: ignore[arg-type]
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
