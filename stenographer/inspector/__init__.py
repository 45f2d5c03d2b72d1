"""The trace and memory inspector: a local, read-only page in the browser.

``inspector_app(get_app)`` is the ASGI app (mounted at ``/inspect`` by the HTTP server);
``serve_inspector(settings)`` runs it alone on loopback (``stenographer inspect``).
Every JSON endpoint runs one named graph through ``App.run``; nothing writes.
"""

from stenographer.inspector.api import LOOPBACK_HOSTS, LOOPBACK_ORIGINS, inspector_app
from stenographer.inspector.serve import serve_inspector

__all__ = ["LOOPBACK_HOSTS", "LOOPBACK_ORIGINS", "inspector_app", "serve_inspector"]
