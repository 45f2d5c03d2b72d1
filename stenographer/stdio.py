"""The stdio transport: one JSON-RPC message per line on stdin, one per line on stdout.

Every line read goes through one function, ``parse``: it is a message for the server,
or it gets its JSON-RPC error answer here (the SDK would only log it, and the client
would wait forever). Pipes, sockets and terminals are read and written by asyncio on
the event loop, without a worker-thread hop per line (the SDK's ``stdio_server()`` hops
twice per call); a stdin the event loop cannot watch (a regular file, /dev/null) is
read in chunks on a worker thread, and such a stdout is written directly.

End of input is the client saying it is done, not that it is gone: the requests
already read are carried out and every reply is written before the server exits (the
SDK's serving loop cancels whatever is still running when its input ends, so the
input is ended for it only once nothing is outstanding). A stdout that is closed under
us means the client is gone: then everything stops at once.

Like the SDK, the wire is moved off fds 0 and 1 while serving: stray reads get EOF
and stray prints go to stderr instead of corrupting the protocol stream.
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import stat
import sys
from collections import Counter
from typing import Any, Protocol

import anyio
from anyio import CancelScope
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp_types import (
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

__all__ = ["MAX_DEPTH", "MAX_LINE_BYTES", "error_line", "parse", "run_stdio"]

MAX_LINE_BYTES = 256 * 1024 * 1024  # one JSON-RPC message; a 1 MB turn is far below
# Arrays and objects inside one another: what the SDK's JSON parser (jiter) accepts, so
# a message is refused for its depth whichever parser reads it (a test pins the edge).
MAX_DEPTH = 201
CHUNK_BYTES = 64 * 1024

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
EXPECTED = "expected one JSON-RPC 2.0 request, notification or response object per line"
BAD_ID = ("the id must be a string or an integer (a notification has no id member); "
          f"{EXPECTED}")


def error_line(request_id: RequestId | None, code: int, message: str) -> bytes:
    """A JSON-RPC error response, one line."""
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return (json.dumps(body) + "\n").encode()


# --- one line ------------------------------------------------------------------------------

def parse(raw: bytes) -> JSONRPCMessage | bytes:
    """The message on one line, or the error answer to write back for it.

    Decoding is the SDK's: invalid UTF-8 becomes U+FFFD. The SDK's validator reads JSON
    with a parser stricter than the standard one, which refuses lone surrogate escapes
    (the tools answer those with their own message) and nesting deeper than MAX_DEPTH;
    a line it refuses is read again with the standard parser to tell which it is.
    """
    line = raw.decode("utf-8", errors="replace")
    try:
        message: JSONRPCMessage = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        return _reparse(line)
    if isinstance(message, JSONRPCNotification) and "id" in json.loads(line):
        # An id that is not a string or an integer made it read as a notification.
        return error_line(None, INVALID_REQUEST, f"Invalid Request: {BAD_ID}")
    return message


def _reparse(line: str) -> JSONRPCMessage | bytes:
    try:
        value = json.loads(line)
    except RecursionError:
        return error_line(None, INVALID_REQUEST, f"Invalid Request: {_too_deep()}")
    except ValueError:
        return error_line(None, PARSE_ERROR, "Parse error: the line is not valid JSON "
                          f"(UTF-8); {EXPECTED}")
    request_id = _readable_id(value)
    if _deeper_than(value, MAX_DEPTH):
        return error_line(request_id, INVALID_REQUEST, f"Invalid Request: {_too_deep()}")
    try:
        message: JSONRPCMessage = jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as ex:
        return error_line(request_id, INVALID_REQUEST, f"Invalid Request: {_reason(value, ex)}")
    if isinstance(message, JSONRPCNotification) and "id" in value:
        return error_line(None, INVALID_REQUEST, f"Invalid Request: {BAD_ID}")
    return message


def _too_deep() -> str:
    return (f"the message is nested more than {MAX_DEPTH} levels deep (arrays and objects "
            f"inside one another); {EXPECTED}")


def _readable_id(value: Any) -> RequestId | None:
    request_id = value.get("id") if isinstance(value, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels (no recursion)."""
    level: list[Any] = [value]
    for _ in range(limit + 1):  # the containers at depth 1, 2, ..., limit + 1
        containers = [item for item in level if isinstance(item, dict | list)]
        if not containers:
            return False
        level = [child for item in containers
                 for child in (item.values() if isinstance(item, dict) else item)]
    return True


_KINDS = {"request": "JSONRPCRequest", "notification": "JSONRPCNotification",
          "response": "JSONRPCResponse", "error": "JSONRPCError"}


def _reason(value: Any, error: ValidationError) -> str:
    """What is wrong with a JSON value that is not a JSON-RPC message, in a few words."""
    if isinstance(value, list):
        return f"batches (JSON arrays) are not supported; {EXPECTED}"
    if not isinstance(value, dict):
        return f"the line holds a JSON {type(value).__name__}; {EXPECTED}"
    if "id" in value and _readable_id(value) is None and not (
            value["id"] is None and "error" in value):
        return BAD_ID
    kind = ("error" if "error" in value else "response" if "result" in value
            else "request" if "id" in value else "notification")
    problems = [f"{'.'.join(str(p) for p in e['loc'][1:]) or 'message'}: {e['msg']}"
                for e in error.errors(include_url=False) if e["loc"][:1] == (_KINDS[kind],)]
    return f"as a JSON-RPC {kind}, {'; '.join(problems[:3])}; {EXPECTED}"


# --- the two ends of the wire --------------------------------------------------------------

class _Source(Protocol):
    async def read(self) -> bytes: ...


class _Sink(Protocol):
    async def write(self, data: bytes) -> None: ...

    async def close(self) -> None: ...


class _PipeSource:
    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    async def read(self) -> bytes:
        return await self.reader.read(CHUNK_BYTES)


class _ThreadSource:
    """A file the event loop cannot watch: read on a worker thread, a chunk at a time."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def read(self) -> bytes:
        return await anyio.to_thread.run_sync(os.read, self.fd, CHUNK_BYTES,
                                              abandon_on_cancel=True)


class _PipeSink:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, data: bytes) -> None:
        self.writer.write(data)  # one whole line: replies cannot interleave
        await self.writer.drain()

    async def close(self) -> None:
        self.writer.close()  # nothing is buffered: drain() waited for every byte


class _FileSink:
    """A file the event loop cannot watch (a regular file, /dev/null): written directly,
    as such a write never waits for a reader."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    async def close(self) -> None:
        os.close(self.fd)


def _watchable(fd: int, events: int) -> bool:
    """Whether asyncio can serve ``fd``: its pipe transports take pipes, sockets and
    character devices, and its selector must accept the descriptor (epoll refuses
    /dev/null and regular files)."""
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    selector = selectors.DefaultSelector()
    try:
        selector.register(fd, events)
    except (OSError, ValueError):
        return False
    finally:
        selector.close()
    return True


async def _open_ends() -> tuple[_Source, _Sink]:
    """Private duplicates of fds 0 and 1, then 0 and 1 diverted (as the SDK does)."""
    loop = asyncio.get_running_loop()
    in_fd, out_fd = os.dup(0), os.dup(1)
    source: _Source
    sink: _Sink
    if _watchable(in_fd, selectors.EVENT_READ):
        reader = asyncio.StreamReader(limit=CHUNK_BYTES)  # pauses the pipe past 2 chunks
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                     os.fdopen(in_fd, "rb", buffering=0))
        source = _PipeSource(reader)
    else:
        source = _ThreadSource(in_fd)
    if _watchable(out_fd, selectors.EVENT_WRITE):
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", buffering=0))
        transport.set_write_buffer_limits(high=0)  # a reply is written when drain() returns
        sink = _PipeSink(asyncio.StreamWriter(transport, protocol, None, loop))
    else:
        sink = _FileSink(out_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return source, sink


# --- serving ---------------------------------------------------------------------------------

class _Outstanding:
    """Requests passed to the server and not answered yet, keyed as the SDK correlates
    ids ("7" and 7 are one). A request the client cancels is never answered."""

    def __init__(self) -> None:
        self.counts: Counter[RequestId] = Counter()
        self.changed = anyio.Event()

    def opened(self, request_id: RequestId) -> None:
        self.counts[coerce_request_id(request_id)] += 1

    def closed(self, request_id: RequestId) -> None:
        key = coerce_request_id(request_id)
        if self.counts[key] > 0:
            self.counts[key] -= 1
            if not self.counts[key]:
                del self.counts[key]
            self.changed.set()

    async def drained(self) -> None:
        while self.counts:
            await self.changed.wait()
            self.changed = anyio.Event()


class _Wire:
    def __init__(self, source: _Source, sink: _Sink) -> None:
        self.source = source
        self.sink = sink
        self.outstanding = _Outstanding()

    async def pump_in(self, send: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        """Split stdin into lines and pass on their messages; at end of input, wait for
        the replies still due, then end the server's input."""
        async with send:
            buffer = bytearray()
            scan = 0  # buffer[:scan] holds no newline
            discarding = False  # inside a line over MAX_LINE_BYTES
            while chunk := await self.source.read():
                buffer += chunk
                start = 0
                while (end := buffer.find(b"\n", scan)) >= 0:
                    if discarding:
                        discarding = False
                    else:
                        await self._line(bytes(buffer[start:end]), send)
                    start = scan = end + 1
                del buffer[:start]
                scan = len(buffer)
                if scan > MAX_LINE_BYTES:
                    if not discarding:
                        await self.sink.write(error_line(None, INVALID_REQUEST, (
                            f"Invalid Request: the message is over {MAX_LINE_BYTES:,} bytes")))
                    discarding = True
                    buffer.clear()
                    scan = 0
            if buffer and not discarding:
                await self._line(bytes(buffer), send)
            await self.outstanding.drained()

    async def _line(self, raw: bytes, send: MemoryObjectSendStream[SessionMessage | Exception]
                    ) -> None:
        if not raw or raw.isspace():
            return
        message = parse(raw)
        if isinstance(message, bytes):
            await self.sink.write(message)
            return
        if isinstance(message, JSONRPCRequest):
            self.outstanding.opened(message.id)
        elif isinstance(message, JSONRPCNotification) and (
                message.method == "notifications/cancelled"):
            # The SDK drops a cancelled request's reply: nothing more is due for it.
            cancelled = cancelled_request_id_from_params(message.params)
            if cancelled is not None:
                self.outstanding.closed(cancelled)
        await send.send(SessionMessage(message))

    async def pump_out(self, receive: MemoryObjectReceiveStream[SessionMessage],
                       on_broken: CancelScope) -> None:
        """Write every message of the server; a stdout closed under us stops everything."""
        async with receive:
            async for item in receive:
                message = item.message
                try:
                    await self.sink.write(_dump(message))
                except OSError:  # EPIPE, ECONNRESET: the client is gone
                    on_broken.cancel()
                    return
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
                    self.outstanding.closed(message.id)


def _dump(message: JSONRPCMessage) -> bytes:
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
    except ValueError:
        # A reply that echoes a lone surrogate cannot be UTF-8: escape it, as JSON allows.
        body = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return json.dumps(body).encode() + b"\n"


async def run_stdio(server: Any) -> None:
    """Serve an ``MCPServer`` over stdio until end of input (the SDK's transport on
    Windows, where asyncio cannot serve pipes this way)."""
    if sys.platform == "win32":
        await server.run_stdio_async()
        return
    wire = _Wire(*await _open_ends())
    lowlevel = server._lowlevel_server  # the SDK offers no public hook for custom streams
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        async with anyio.create_task_group() as everything:
            everything.start_soon(wire.pump_in, read_send)
            async with anyio.create_task_group() as serving:
                serving.start_soon(wire.pump_out, write_receive, everything.cancel_scope)
                await lowlevel.run(read_receive, write_send,
                                   lowlevel.create_initialization_options())
            everything.cancel_scope.cancel()  # every reply is written; stop reading
    finally:
        await wire.sink.close()
