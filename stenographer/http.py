"""The HTTP server: Streamable HTTP at ``/mcp``, legacy SSE at ``/sse`` + ``/messages/``
and the browser inspector at ``/inspect``, in one process around one store.

One lifespan. The Streamable HTTP session manager enters the MCP server's lifespan once
(it opens the store through ``AppLoader``); SSE connections and the inspector reuse that
same loader. (``MCPServer.sse_app()`` would enter the lifespan again for every SSE
connection, i.e. open the store once per client.)

Every request, on every path, passes three checks in this order:

1. Host and Origin against an allowlist (421 / 403): the loopback names on the bound
   port plus STENO_ALLOWED_HOSTS / STENO_ALLOWED_ORIGINS. Always on: the SDK turns this
   protection off when bound to 0.0.0.0 unless it is given settings, so it is given them.
2. ``Authorization: Bearer <token>`` (401), on loopback too, unless ``--no-token``:
   the token ``stenographer.http_auth.http_auth`` settles on (configured, else
   generated into the data directory), which also refuses unsafe bind addresses
   before anything is bound.
3. While shutting down, 503 (no new work is accepted).

Shutdown (SIGINT or SIGTERM): new requests get 503; the tool calls in flight, on every
transport, finish and deliver their replies (at most ``SHUTDOWN_GRACE_S``); then the
listener closes, open streams end, and the lifespan closes the store, which flushes the
stage traces. The process exits 0. A second signal stops without waiting.
"""

from __future__ import annotations

import contextlib
import hmac
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.runner import serve_dual_era_loop
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nodes.publish.wording import counted
from stenographer.http_auth import (
    TOKEN_FILE,
    HttpConfigError,
    http_auth,
    is_loopback,
    say,
    warn_readable,
)
from stenographer.inspector.api import inspector_app
from stenographer.server import AppLoader, mcp
from stenographer.settings import Settings
from stenographer.sync_http import sync_routes

if TYPE_CHECKING:
    from stenographer.app import App

__all__ = [
    "DEFAULT_HTTP_HOST",
    "DEFAULT_HTTP_PORT",
    "SHUTDOWN_GRACE_S",
    "HttpConfigError",
    "build_http_app",
    "is_loopback",
    "serve_http",
]

DEFAULT_HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 8765
SHUTDOWN_GRACE_S = 30.0  # longest wait for in-flight tool calls after SIGINT/SIGTERM
STREAMS_GRACE_S = 10  # then the longest wait for open connections to close
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def transport_security(settings: Settings, port: int) -> TransportSecuritySettings:
    """Host/Origin allowlist: loopback names on ``port`` (any port when 0) plus the
    configured entries. Requests without an Origin (not from a browser) pass that check."""
    p = str(port) if port else "*"
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:{p}" for name in LOOPBACK_NAMES] + list(settings.allowed_hosts),
        allowed_origins=[f"http://{name}:{p}" for name in LOOPBACK_NAMES]
        + list(settings.allowed_origins),
    )


def _max_body_bytes(settings: Settings) -> int:
    # A turn of max_content_chars characters, JSON-escaped at worst (12 bytes for a
    # character outside the BMP as a \\u surrogate pair), plus the envelope.
    return max(DEFAULT_MAX_REQUEST_BODY_SIZE, settings.max_content_chars * 12 + 64 * 1024)


# --- request checks and the drain -----------------------------------------------------------

class _ToolCalls:
    """MCP middleware counting the tool calls being handled, on every transport.

    The count falls when the handler returns; the reply is written right after, on the
    same event loop, before the server's next shutdown tick (0.1 s) can act on it.
    """

    def __init__(self) -> None:
        self.active = 0

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
                       ) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        self.active += 1
        try:
            return await call_next(ctx)
        finally:
            self.active -= 1


TOOL_CALLS = _ToolCalls()


@dataclass
class _Drain:
    """Shutdown state shared by the request guard and the server loop.

    Work in flight is the tool calls (counted by TOOL_CALLS on every transport: an SSE
    call is answered 202 before it runs) plus the requests other than GET and HEAD (a
    Streamable HTTP reply may be an event stream, which would be ended at shutdown).
    GET requests are event streams, which end at shutdown anyway, or inspector reads.
    """

    draining: bool = False
    deadline: float = 0.0
    requests: int = 0

    def start(self, grace_s: float) -> None:
        self.draining = True
        self.deadline = time.monotonic() + grace_s

    def in_flight(self) -> str:
        return (f"{counted(TOOL_CALLS.active, 'tool call')} and "
                f"{counted(self.requests, 'request')} in flight")

    def done(self) -> bool:
        idle = TOOL_CALLS.active == 0 and self.requests == 0
        return idle or time.monotonic() >= self.deadline


class _Guard:
    """ASGI middleware in front of every route: Host/Origin, bearer token, draining."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings, token: str | None,
                 drain: _Drain) -> None:
        self.app = app
        self.security = TransportSecurityMiddleware(security)  # the SDK's own check
        self.token = None if token is None else token.encode("ascii")
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = await self.security.validate_request(request, is_post=False)
        if refusal is None and not self._authorized(request.headers.get("authorization")):
            refusal = JSONResponse(
                {"error": "invalid_token",
                 "error_description": "send Authorization: Bearer <token> (the server's "
                                      "STENO_HTTP_TOKEN, or its data directory's "
                                      f"{TOKEN_FILE} file)"},
                status_code=401, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        if refusal is None and self.drain.draining:
            refusal = PlainTextResponse("The server is shutting down.", status_code=503,
                                        headers={"Retry-After": "5", "Connection": "close"})
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        counted = scope["method"] not in ("GET", "HEAD")
        self.drain.requests += counted
        try:
            response = _Completion(send)
            await self.app(scope, receive, response.send)
            if response.started and not response.complete:
                # sse_starlette ends an event stream at shutdown by cancelling it, before
                # the final empty chunk; send it so that the client sees a clean end.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.drain.requests -= counted

    def _authorized(self, header: str | None) -> bool:
        if self.token is None:
            return True
        scheme, _, credentials = (header or "").partition(" ")
        # Constant-time comparison; every request pays the same whatever the token sent.
        matches = hmac.compare_digest(credentials.strip().encode("latin-1"), self.token)
        return matches and scheme.lower() == "bearer"


class _Completion:
    """Follows the response messages of one request."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = self.complete = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self._send(message)


# --- the app ----------------------------------------------------------------------------------

class _Shared:
    """The lifespan's AppLoader, for the SSE connections and the inspector."""

    def __init__(self) -> None:
        self.loader: AppLoader | None = None

    def require(self) -> AppLoader:
        if self.loader is None:
            raise RuntimeError("the HTTP app is not running (its lifespan has not started)")
        return self.loader

    async def app(self) -> App:
        return await self.require().app()


def _opened_loader(manager: StreamableHTTPSessionManager) -> AppLoader:
    # The manager keeps what the lifespan yielded in a private attribute and offers no
    # accessor; reading it is what lets SSE and the inspector share the one store.
    loader = manager._lifespan_state
    if not isinstance(loader, AppLoader):
        raise RuntimeError(f"unexpected lifespan state {type(loader).__name__}")
    return loader


class _SseConnection:
    """GET /sse: one legacy SSE connection served with the shared lifespan state."""

    def __init__(self, transport: SseServerTransport, shared: _Shared) -> None:
        self.transport = transport
        self.shared = shared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loader = self.shared.require()
        server = mcp._lowlevel_server  # as MCPServer.sse_app() does, minus the lifespan
        async with self.transport.connect_sse(scope, receive, send) as (read, write):
            await serve_dual_era_loop(server, read, write, lifespan_state=loader,
                                      init_options=server.create_initialization_options())


def _build(settings: Settings, host: str, port: int, token: str | None
           ) -> tuple[Starlette, _Drain]:
    security = transport_security(settings, port)
    max_body = _max_body_bytes(settings)
    if TOOL_CALLS not in mcp.middleware:  # once per process; counting is all it does
        mcp.middleware.append(TOOL_CALLS)
    manager = StreamableHTTPSessionManager(
        app=mcp._lowlevel_server, security_settings=security, max_request_body_size=max_body)
    sse = SseServerTransport("/messages/", security_settings=security,
                             max_request_body_size=max_body)
    shared = _Shared()
    drain = _Drain()

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():  # enters the MCP server's lifespan: opens the store
            shared.loader = _opened_loader(manager)
            try:
                yield
            finally:
                shared.loader = None
        # Leaving the manager's run() left the MCP lifespan: the store is closed.

    routes: list[BaseRoute] = [
        Route("/mcp", endpoint=StreamableHTTPASGIApp(manager)),
        Route("/sse", endpoint=_SseConnection(sse, shared), methods=["GET"]),
        Mount("/messages/", app=sse.handle_post_message),
        # The inspector checks Host/Origin itself too; it gets the same allowlists.
        Mount("/inspect", app=inspector_app(shared.app, allowed_hosts=security.allowed_hosts,
                                            allowed_origins=security.allowed_origins)),
        *sync_routes(shared.app),  # export/import between instances (stenographer.sync)
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(_Guard, security=security, token=token, drain=drain)
    return app, drain


def build_http_app(settings: Settings, *, host: str, port: int, no_token: bool = False
                   ) -> Starlette:
    """The ASGI app for a server bound to ``host``:``port`` (the port goes into the
    Host/Origin allowlist; 0 allows any port), requiring the token ``http_auth`` gives.
    Raises ``HttpConfigError`` when a non-loopback ``host`` lacks a token or an
    allowlist. Its lifespan opens the store."""
    return _build(settings, host, port, http_auth(settings, host, no_token=no_token)[0])[0]


# --- serving ----------------------------------------------------------------------------------

class _Server(uvicorn.Server):
    """uvicorn, plus: drain tool calls before closing, and exit 0 after a signal."""

    def __init__(self, config: uvicorn.Config, drain: _Drain, banner: str) -> None:
        super().__init__(config)
        self.drain = drain
        self.banner = banner
        self.announced = False

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn >= 0.29 raises the captured signal again once it has shut down, so a
        # server stopped by SIGTERM dies by it (exit 143) even after a clean shutdown
        # (https://github.com/Kludex/uvicorn/pull/1600). Ours returns and exits 0.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # sse_starlette ends open event streams once the SIGTERM handler's server has
        # should_exit set, so that is set only after the tool calls in flight are done.
        if self.drain.draining:
            self.should_exit = self.force_exit = True  # second signal: stop now
            return
        self.drain.start(SHUTDOWN_GRACE_S)

    async def on_tick(self, counter: int) -> bool:
        # Runs every 0.1 s on the event loop (a signal handler should not print).
        if self.drain.draining and not self.should_exit:
            if not self.announced:
                self.announced = True
                say(f"shutting down: refusing new requests; {self.drain.in_flight()}")
            if self.drain.done():
                if time.monotonic() >= self.drain.deadline:
                    say(f"{self.drain.in_flight()} after {SHUTDOWN_GRACE_S:g} s; "
                         "closing anyway")
                self.should_exit = True
        return await super().on_tick(counter)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            say(self.banner)


def _bind(host: str, port: int) -> socket.socket:
    """Bind (not yet listen) here, so a busy port is a clear error and port 0 works."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says TCP; without it a keep-alive reply written in two parts
    # waits for the client's delayed ACK (~40 ms a call).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as ex:
        sock.close()
        raise HttpConfigError(f"cannot listen on {host}:{port}: {ex.strerror}") from None
    return sock


def serve_http(settings: Settings, *, host: str = DEFAULT_HTTP_HOST,
               port: int = DEFAULT_HTTP_PORT, no_token: bool = False) -> None:
    """Serve until SIGINT or SIGTERM, then shut down gracefully and return.

    Raises ``HttpConfigError`` (before binding) when the configuration is refused or the
    address cannot be bound.
    """
    token, auth_note = http_auth(settings, host, no_token=no_token)
    if settings.http_token_file is not None:
        warn_readable(settings.http_token_file)
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    app, drain = _build(settings, host, bound, token)
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    base = f"http://{shown}:{bound}"
    say(auth_note)
    notes = ["bearer token required" if token else "no token"]
    if not is_loopback(host):
        notes.append("plain HTTP: put TLS in front when crossing a network")
    banner = (f"serving MCP at {base}/mcp (Streamable HTTP) and {base}/sse "
              f"(SSE), inspector at {base}/inspect/ ({'; '.join(notes)})")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            ws="none", timeout_graceful_shutdown=STREAMS_GRACE_S)
    try:
        _Server(config, drain, banner).run(sockets=[sock])
    finally:
        sock.close()
