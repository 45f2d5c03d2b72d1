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
import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any

__all__ = [
    "MAX_LINE_BYTES", "PipeLines", "PipeWriter", "error_line", "rejection", "run_stdio",
]

MAX_LINE_BYTES = 256 * 1024 * 1024  # one JSON-RPC message; a 1 MB turn is far below


PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def error_line(request_id: Any, code: int, message: str) -> bytes:
    """A JSON-RPC error response, one line."""
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return (json.dumps(body) + "\n").encode()


def rejection(line: str) -> bytes | None:
    """The error answer for a line that is not a valid JSON-RPC message, else None.

    The SDK only logs such lines, so the client would wait forever for an answer;
    JSON-RPC 2.0 wants a Parse error (-32700) or an Invalid Request (-32600) for the
    request's id when it can be read, else for id null.
    """
    from mcp_types import jsonrpc_message_adapter

    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValueError as ex:
        reason = str(ex).splitlines()[0][:200] if str(ex) else type(ex).__name__
    try:
        message = json.loads(line)
    except ValueError:
        return error_line(None, PARSE_ERROR, "Parse error: the line is not valid JSON "
                          "(one JSON-RPC 2.0 message per line, UTF-8)")
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        request_id = None
    return error_line(request_id, INVALID_REQUEST, f"Invalid Request: {reason}; expected a "
                      "JSON-RPC 2.0 request, notification or response object")


class PipeLines:
    """Async iterator of decoded lines, as the SDK expects from ``stdin``.

    Lines that are not valid JSON-RPC are answered here with an error and not passed on.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                raw = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as ex:
                raw = ex.partial
            except asyncio.LimitOverrunError as ex:
                await self.reader.readexactly(ex.consumed)
                self.writer.write(error_line(None, INVALID_REQUEST, "Invalid Request: the "
                                             f"message is over {MAX_LINE_BYTES:,} bytes"))
                continue
            if not raw:
                raise StopAsyncIteration
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            answer = rejection(line)
            if answer is None:
                return line
            self.writer.write(answer)  # one whole line: it cannot interleave with replies


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
    return PipeLines(reader, writer), PipeWriter(writer)


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
