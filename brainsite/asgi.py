"""The web app as ASGI: `/mcp/` is the MCP server's streamable HTTP transport (an ASGI app from
the MCP SDK), everything else is Django.

Why ASGI for the whole site: the SDK's transport is ASGI-only, and serving it from the same
processes as the API keeps one port, one bearer auth and one deployment. `make run` serves this
with gunicorn's uvicorn worker (`uvicorn_worker.UvicornWorker`), as many processes as before.
Django runs its synchronous views in one thread per process under ASGI, which is the same
one-request-at-a-time per process that gunicorn's sync workers gave; the MCP tools run in that
same thread (`sync_to_async`), so they share the process's database connection."""

import os
import warnings

from django.core.asgi import get_asgi_application

# WhiteNoise answers static files with a file iterator, which Django's ASGI handler reads in a
# thread (and says so on every file); static files are small, so that is fine.
STATIC_ITERATOR_WARNING = "StreamingHttpResponse must consume synchronous iterators"
warnings.filterwarnings("ignore", message=STATIC_ITERATOR_WARNING)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brainsite.settings")
django_app = get_asgi_application()

from memory.mcp.http import PATH, mcp_asgi_app  # noqa: E402  (needs Django set up)


def build_application():
    """The router: lifespan and `/mcp/` (and `/mcp`) to the MCP app, the rest to Django. The MCP
    app's lifespan (which runs the SDK's session manager) can run once, so each server gets its
    own from here."""
    mcp_app = mcp_asgi_app()

    async def application(scope, receive, send):
        if scope["type"] == "lifespan":  # Django has no lifespan; the MCP app's starts its sessions
            return await mcp_app(scope, receive, send)
        path = scope.get("path", "")
        if path == PATH.rstrip("/"):
            scope = {**scope, "path": PATH, "raw_path": PATH.encode()}
            path = PATH
        if path.startswith(PATH):
            return await mcp_app(scope, receive, send)
        return await django_app(scope, receive, send)

    return application


application = build_application()
