"""`stenographer inspect`: the inspector alone, on a loopback address."""

from __future__ import annotations

import ipaddress
import signal
import socket
import sys
import threading
import webbrowser
from types import FrameType

import uvicorn

from stenographer.app import App, open_app
from stenographer.inspector.api import inspector_app
from stenographer.settings import Settings

__all__ = ["DEFAULT_PORT", "bind_loopback", "serve_inspector"]

DEFAULT_PORT = 8766


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_loopback(host: str, port: int) -> socket.socket:
    """A listening socket on a loopback address (port 0 picks a free port).

    Listening before the server starts means the printed address accepts connections
    at once (they wait in the backlog until the event loop takes them).
    """
    if not _is_loopback(host):
        raise ValueError(f"the inspector binds loopback addresses only (127.0.0.1, ::1, "
                         f"localhost), not {host!r}; to reach it from elsewhere, use the "
                         "HTTP server's /inspect mount with its token and allowed hosts")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP (not 0): asyncio sets TCP_NODELAY only on sockets that say TCP;
    # without it, Nagle plus delayed ACKs add ~40 ms to every keep-alive response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def serve_inspector(settings: Settings, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                    open_browser: bool = False) -> None:
    """Serve the inspector on ``http://host:port/`` until interrupted (Ctrl-C, SIGTERM).

    Prints the address on stderr once it accepts connections. Read-only: the store is
    opened like the MCP server's and only read graphs run. Returns after a graceful
    stop with the store closed (uvicorn re-raises the stopping signal once it has shut
    down; SIGTERM then unwinds like Ctrl-C instead of killing the process).
    """
    sock = bind_loopback(host, port)
    app: App | None = None
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    try:
        app = open_app(settings)
        opened = app

        async def get_app() -> App:
            return opened

        name = f"[{host}]" if ":" in host else host
        url = f"http://{name}:{sock.getsockname()[1]}/"
        config = uvicorn.Config(inspector_app(get_app), log_level="warning",
                                access_log=False, server_header=False, lifespan="off")
        print(f"Inspector at {url} (read-only; Ctrl-C stops)", file=sys.stderr, flush=True)
        if open_browser:
            webbrowser.open(url)
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        sock.close()
        if app is not None:
            app.close()
