"""The inspector's ASGI app: one HTML page and read-only JSON endpoints.

Each endpoint maps query and path parameters to a request, runs one named graph on a
worker thread (``App.run``) and returns the channels the page needs plus ``meta`` (the
graph, run id and duration of this read). Errors are JSON ``{"error": {code, message}}``
with a 4xx status for bad input (400), unknown ids (404), a foreign Host (421) or
Origin (403), and a method other than GET (405).
"""

from __future__ import annotations

import hashlib
import re
from base64 import b64encode
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from store.errors import InvalidInput, NotFound, StenoError

if TYPE_CHECKING:
    from stenographer.app import App

__all__ = ["LOOPBACK_HOSTS", "LOOPBACK_ORIGINS", "inspector_app"]

# The same Host/Origin allow-lists that the MCP SDK applies to a loopback HTTP server.
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")

GetApp = Callable[[], Awaitable["App"]]

_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_STATUS = {InvalidInput: 400, NotFound: 404}


def _allowed(value: str, patterns: Sequence[str]) -> bool:
    """Exact match, or ``base:*`` for any port (as the MCP SDK's transport security)."""
    return any(value == p or (p.endswith(":*") and value.startswith(p[:-1]))
               for p in patterns)


def _error(status: int, message: str, code: str = "inspector.error",
           **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, **extra}},
                        status_code=status, headers=_HEADERS)


class HostOriginGuard:
    """Rejects a foreign Host (421: DNS rebinding) or Origin (403) before any route."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str], origins: Sequence[str]) -> None:
        self.app, self.hosts, self.origins = app, tuple(hosts), tuple(origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            host, origin = headers.get("host", ""), headers.get("origin")
            response = None
            if not _allowed(host, self.hosts):
                response = _error(421, f"Host {host[:100]!r} is not served here; open the "
                                  "inspector through a loopback address",
                                  "inspector.host")
            elif origin is not None and not _allowed(origin, self.origins):
                response = _error(403, f"Origin {origin[:100]!r} may not read the inspector",
                                  "inspector.origin")
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _page() -> tuple[bytes, str]:
    """The page and a Content-Security-Policy that admits only its own inline code."""
    html = resources.files(__package__).joinpath("page.html").read_bytes()

    def hashes(tag: bytes) -> str:
        blocks = re.findall(rb"<" + tag + rb">(.*?)</" + tag + rb">", html, re.S)
        return " ".join(f"'sha256-{b64encode(hashlib.sha256(b).digest()).decode()}'"
                        for b in blocks)

    csp = (f"default-src 'none'; script-src {hashes(b'script')}; "
           f"style-src {hashes(b'style')}; connect-src 'self'; img-src 'self' data:; "
           "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return html, csp


def _number(value: str | None) -> int | str | None:
    """A decimal parameter as an int; anything else as given, for the graph to reject."""
    if value is not None and value.isascii() and value.isdecimal():
        return int(value)
    return value


def _flag(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes", "on")


class _Api:
    def __init__(self, get_app: GetApp) -> None:
        self.get_app = get_app

    async def run(self, graph: str, request: dict[str, Any]
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Run a graph off the event loop; StenoErrors become JSON errors upstream."""
        app = await self.get_app()
        out, trace = await anyio.to_thread.run_sync(app.run, graph, request)
        meta = {"graph": trace["graph"], "run_id": trace["run_id"],
                "duration_ms": trace["duration_ms"]}
        return out, meta

    async def sessions(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        out, meta = await self.run("inspect_sessions", {
            "limit": _number(q.get("limit", "100")), "offset": _number(q.get("offset", "0"))})
        reply = out["reply"]
        return {"sessions": reply["sessions"], "total": reply["total"],
                "counts": reply["counts"], "meta": meta}

    async def notes(self, request: Request) -> dict[str, Any]:
        # ./api/notes?session= also serves ids such as ".." that a URL path would resolve.
        session = request.path_params.get("session") or request.query_params.get("session")
        out, meta = await self.run("inspect_notes", {"session_id": session,
                                             "max_chars": _number(request.query_params.get(
                                                 "max_chars"))})
        notes = out["reply"]
        if not notes["found"]:
            raise NotFound(f"no session {session!r} has been recorded; session ids are "
                           "case-sensitive")
        return {"session_id": notes["session_id"], "milestones": notes["milestones"],
                "briefs": notes["briefs"], "live": notes["live"],
                "markdown": notes["markdown"], "meta": meta}

    async def search(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        session = q.get("session") or None
        mode = q.get("mode") or "hybrid"  # the search refuses any other than its three
        out, meta = await self.run("search", {
            "query": q.get("q", ""), "session_id": session, "cross_session": session is None,
            "mode": mode, "role": q.get("role") or "any",
            "limit": _number(q.get("limit", "20")), "cursor": q.get("cursor") or None,
            "since": q.get("since") or None, "until": q.get("until") or None})
        reply = out["reply"]
        return {"hits": reply["hits"], "total": reply["total"],
                "next_cursor": reply["next_cursor"], "notes": reply["notes"],
                "mode": mode, "meta": meta}

    async def exchange(self, request: Request) -> dict[str, Any]:
        out, meta = await self.run("inspect_exchange", {
            "exchange_id": _number(request.path_params["exchange_id"])})
        return {"exchange": out["reply"]["exchange"], "meta": meta}

    async def brief(self, request: Request) -> dict[str, Any]:
        out, meta = await self.run("inspect_brief", {
            "brief_id": _number(request.path_params["brief_id"])})
        return {"brief": out["reply"]["brief"], "meta": meta}

    async def runs(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        out, meta = await self.run("inspect_runs", {
            "limit": _number(q.get("limit", "50")), "graph": q.get("graph") or None,
            "all_graphs": _flag(q.get("all"))})
        reply = out["reply"]
        return {"runs": reply["runs"], "hidden_graphs": reply["hidden_graphs"], "meta": meta}

    async def communities(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        out, meta = await self.run("graphrag_community", {
            "limit": _number(q.get("limit", "50")), "offset": _number(q.get("offset", "0"))})
        reply = out["reply"]
        return {"communities": reply["communities"], "total": reply["total"], "meta": meta}

    async def community(self, request: Request) -> dict[str, Any]:
        out, meta = await self.run("graphrag_community", {
            "community_id": _number(request.path_params["community_id"])})
        reply = out["reply"]
        return {"community": reply["community"], "sentences": reply["sentences"], "meta": meta}

    async def run_trace(self, request: Request) -> dict[str, Any]:
        out, meta = await self.run("trace", {"run_id": request.path_params["run_id"]})
        return {"trace": out["reply"]["trace"], "meta": meta}


def _json(handler: Callable[[Request], Awaitable[dict[str, Any]]]
          ) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            body = await handler(request)
        except StenoError as ex:
            status = next((s for cls, s in _STATUS.items() if isinstance(ex, cls)), 503)
            extra: dict[str, Any] = {"graph": ex.graph} if ex.graph else {}
            trace = getattr(ex, "stage_trace", None)
            if isinstance(trace, dict):
                extra["run_id"] = trace.get("run_id")
            return _error(status, str(ex), ex.code, **extra)
        except Exception as ex:  # e.g. the store could not be opened
            return _error(503, f"the inspector could not read the store: {ex}"[:500],
                          "inspector.unavailable")
        return JSONResponse(body, headers=_HEADERS)
    return endpoint


def inspector_app(get_app: GetApp, *, allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
                  allowed_origins: Sequence[str] = LOOPBACK_ORIGINS) -> Starlette:
    """The inspector as an ASGI app; ``get_app`` is awaited for the App on each request.

    Serve it at a path ending in ``/`` (e.g. mount at ``/inspect``: the page fetches
    ``./api/...`` relative to itself). Only GET and HEAD are routed. A server bound to
    another address passes its own allow-lists (and guards the mount with its token).
    """
    api = _Api(get_app)
    html, csp = _page()

    async def page(request: Request) -> Response:
        return Response(html, media_type="text/html; charset=utf-8",
                        headers={**_HEADERS, "Content-Security-Policy": csp})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        messages = {404: "no such page or endpoint; the API is under ./api/",
                    405: "the inspector is read-only: only GET is allowed"}
        message = messages.get(exc.status_code, str(exc.detail))
        response = _error(exc.status_code, message, f"inspector.http_{exc.status_code}")
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/api/sessions", _json(api.sessions), methods=["GET"]),
        Route("/api/notes", _json(api.notes), methods=["GET"]),
        Route("/api/notes/{session:path}", _json(api.notes), methods=["GET"]),
        Route("/api/search", _json(api.search), methods=["GET"]),
        Route("/api/exchange/{exchange_id}", _json(api.exchange), methods=["GET"]),
        Route("/api/briefs/{brief_id}", _json(api.brief), methods=["GET"]),
        Route("/api/runs", _json(api.runs), methods=["GET"]),
        Route("/api/runs/{run_id}", _json(api.run_trace), methods=["GET"]),
        Route("/api/graph/communities", _json(api.communities), methods=["GET"]),
        Route("/api/graph/communities/{community_id}", _json(api.community),
              methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    app.add_middleware(HostOriginGuard, hosts=allowed_hosts, origins=allowed_origins)
    return app
