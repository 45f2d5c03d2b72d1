"""The sync endpoints of the HTTP server (behind the same Host/Origin and bearer-token
checks as every other path, stenographer.http):

- ``POST /sync/push``: the body is a bundle (application/zstd). It is spooled to a file
  in the data directory (bounded memory), verified and applied by ``sync_import``;
  the reply is JSON ``{applied, duplicates, relinked, turns, through}``. A bundle that
  does not verify gets 400 with the reason and nothing is applied; a store that cannot
  take it gets 503 (the sender retries).
- ``GET /sync/pull?after=ID&limit=N``: a bundle of the next ``N`` records after id
  ``ID``, written by ``sync_export`` and streamed back; ``X-Steno-Through`` holds the
  last id in it (absent when there is nothing after ``ID``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from nodes.publish.sync_batches import remove_spool, spool_path
from store.errors import InvalidInput, StenoError

if TYPE_CHECKING:
    from stenographer.app import App

__all__ = ["MAX_PUSH_BYTES", "sync_routes"]

MAX_PUSH_BYTES = 512 * 1024 * 1024  # one pushed batch; a sender's batch is far smaller
MAX_PULL_LIMIT = 10_000


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def sync_routes(get_app: Callable[[], Awaitable[App]]) -> list[Route]:
    async def receive(request: Request) -> Response:
        app = await get_app()
        path = spool_path(app.settings.data_dir, "recv")
        try:
            size = 0
            with open(path, "wb") as fh:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > MAX_PUSH_BYTES:
                        return _error(413, f"a pushed bundle may hold at most "
                                           f"{MAX_PUSH_BYTES:,} bytes; send smaller batches "
                                           "(STENO_SYNC_BATCH)")
                    fh.write(chunk)
            client = request.client.host if request.client else "unknown"
            out, _ = await anyio.to_thread.run_sync(
                app.run, "sync_import", {"path": str(path), "peer": f"push from {client}"})
        except InvalidInput as ex:
            return _error(400, str(ex))
        except StenoError as ex:
            return _error(503, f"the store could not take the bundle: {ex}")
        finally:
            remove_spool(path)
        reply = out["reply"]
        return JSONResponse({k: reply[k] for k in (
            "applied", "duplicates", "relinked", "bundle_turns", "through", "text")})

    async def serve_pull(request: Request) -> Response:
        try:
            after = int(request.query_params.get("after", "0"))
            limit = int(request.query_params.get("limit", "500"))
        except ValueError:
            return _error(400, "after and limit must be whole numbers")
        if after < 0 or not 1 <= limit <= MAX_PULL_LIMIT:
            return _error(400, f"after must be 0 or more and limit 1 to {MAX_PULL_LIMIT}")
        app = await get_app()
        path = spool_path(app.settings.data_dir, "send")
        try:
            out, _ = await anyio.to_thread.run_sync(
                app.run, "sync_export", {"path": str(path), "after": after, "limit": limit})
        except StenoError as ex:
            remove_spool(path)
            return _error(400 if isinstance(ex, InvalidInput) else 503, str(ex))
        through = out["reply"]["through"]
        headers = {} if through is None else {"X-Steno-Through": str(through)}
        return FileResponse(path, media_type="application/zstd", headers=headers,
                            background=BackgroundTask(remove_spool, path))

    return [Route("/sync/push", endpoint=receive, methods=["POST"]),
            Route("/sync/pull", endpoint=serve_pull, methods=["GET"])]
