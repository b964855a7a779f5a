"""The web app as ASGI: `/mcp/` is the MCP server's streamable HTTP transport (an ASGI app from
the MCP SDK), everything else is Django's WSGI app.

Why: the SDK's transport is ASGI-only, and serving it from the same processes as the API keeps
one port, one bearer auth and one deployment; `make run` serves this with gunicorn's uvicorn
worker. Django itself stays a WSGI app, run by `a2wsgi` in a small pool of threads per process
(WEB_THREADS, default 4). Not Django's ASGI handler: that runs each request's synchronous code
in a thread of its own, so persistent database connections cannot be reused and every API call
pays for a new connection (measured: ~15 ms instead of ~4 ms for `GET /api/me`). In the pool,
each thread keeps its connection, as a sync gunicorn worker does. The MCP tools run in
asgiref's thread-sensitive executor (one more thread, one more persistent connection)."""

import os

from a2wsgi import WSGIMiddleware
from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brainsite.settings")
from brainsite.ops.tracing import tracing_setup  # noqa: E402

tracing_setup()  # before Django's app is built: it adds its middleware (off unless OTEL_* say so)
django_wsgi = get_wsgi_application()

from brainsite.ops.asgi_body import buffer_body  # noqa: E402
from brainsite.ops.asgi_log import log_requests  # noqa: E402
from brainsite.ops.metrics import asgi_observed  # noqa: E402
from memory.mcp.http import (  # noqa: E402  (needs Django set up)
    METADATA_PATH,
    PATH,
    allowed_hosts_only,
    is_oauth_path,
    mcp_asgi_app,
    metadata_app,
    no_oauth_app,
)


def build_application():
    """The router: lifespan and `/mcp/` (and `/mcp`) to the MCP app, its Protected Resource
    Metadata and the OAuth discovery paths to `memory.mcp.http`, the rest to Django. The MCP
    app's lifespan (which runs the SDK's session manager) can run once, so each server gets its
    own from here."""
    # What is served beside Django is held to ALLOWED_HOSTS as Django's own paths are.
    mcp_app = asgi_observed(allowed_hosts_only(mcp_asgi_app()), "/mcp/")
    metadata = allowed_hosts_only(metadata_app)
    no_oauth = allowed_hosts_only(no_oauth_app)
    mcp_logged = log_requests(mcp_app)  # Django logs its own requests (RequestLogMiddleware)
    django_app = WSGIMiddleware(django_wsgi, workers=int(os.environ.get("WEB_THREADS", "4")))
    # Whole bodies only: a slow client waits on the event loop, not in a pool thread.
    django_app = buffer_body(
        django_app,
        timeout=settings.BRAIN_BODY_TIMEOUT_SECONDS,
        upload_timeout=settings.BRAIN_UPLOAD_TIMEOUT_SECONDS,
    )

    async def application(scope, receive, send):
        if scope["type"] == "lifespan":  # Django has no lifespan; the MCP app's starts its sessions
            return await mcp_app(scope, receive, send)
        path = scope.get("path", "")
        if path == PATH.rstrip("/"):
            scope = {**scope, "path": PATH, "raw_path": PATH.encode()}
            path = PATH
        if path.startswith(PATH):
            return await mcp_logged(scope, receive, send)
        if path == METADATA_PATH or path.startswith(METADATA_PATH + "/"):
            return await metadata(scope, receive, send)
        if is_oauth_path(path):  # no OAuth here: say so in JSON
            return await no_oauth(scope, receive, send)
        return await django_app(scope, receive, send)

    return application


application = build_application()
