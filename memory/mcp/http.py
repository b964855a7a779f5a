"""The streamable HTTP transport: the SDK's ASGI app behind Brain's bearer-token auth.

Stateless and JSON-answering: every POST carries its own token and gets one JSON answer, so any
web process (and any number of them, on any host) serves any request with no session to keep —
the same as the REST API. The token is checked before the SDK sees the request, by the API's
own lookup (`knowledge.principals.auth.token_authenticate`, bad-token throttle included): a bad token is a
401, a throttled address a 429 with Retry-After, a token that is not an agent's a 403, each
with the API's JSON error body. DNS-rebinding protection (a browser on the user's machine
reaching a local server) is off because no request gets in without a bearer token, which a
browser never adds by itself."""

import json
from types import SimpleNamespace

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from mcp import types
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework import exceptions

from knowledge.principals.auth import token_authenticate
from knowledge.web import api_exception_handler
from memory.mcp.server import build_server

PATH = "/mcp/"
SCOPE_KEY = "brain.principal"


def _authenticate(raw: str, meta: dict):
    close_old_connections()
    try:
        principal, _token = token_authenticate(raw, SimpleNamespace(META=meta))
        return principal
    finally:
        close_old_connections()


async def _answer(send, status: int, body: dict, headers: dict | None = None) -> None:
    payload = json.dumps(body).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw_headers += [
        (k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (headers or {}).items()
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": payload})


class BearerAuth:
    """ASGI middleware: only requests with a live agent token reach the MCP app; the agent is
    put in the ASGI scope for the tools (`principal_from_request`)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        parts = headers.get(b"authorization", b"").split()
        if len(parts) != 2 or parts[0].lower() != b"bearer":
            return await _answer(
                send,
                401,
                {"error": "Use the header 'Authorization: Bearer <token>'."},
                {"WWW-Authenticate": 'Bearer realm="brain"'},
            )
        client = scope.get("client") or ("", 0)
        meta = {
            "REMOTE_ADDR": client[0],
            "HTTP_X_FORWARDED_FOR": headers.get(b"x-forwarded-for", b"").decode("latin-1"),
        }
        try:
            principal = await sync_to_async(_authenticate)(parts[1].decode(errors="replace"), meta)
        except exceptions.APIException as exc:
            response = api_exception_handler(exc, {})
            extra = {k: v for k, v in response.items() if k.lower() in ("retry-after", "www-authenticate")}
            return await _answer(send, response.status_code, response.data, extra)
        if principal.kind != "agent":
            return await _answer(send, 403, {"error": "The MCP server serves agent tokens only."})
        await self.app({**scope, SCOPE_KEY: principal}, receive, _json_too_large(send, headers))


def _json_too_large(send, headers: dict):
    """`send` with the SDK's plain-text 413 (a body over the limit, refused before it is parsed)
    replaced by a JSON-RPC error naming the limit, as the REST API's 413 names it."""
    replaced = False

    async def wrapped(message):
        nonlocal replaced
        if message["type"] == "http.response.start" and message["status"] == 413:
            replaced = True
            limit = body_limit()
            size = headers.get(b"content-length", b"").decode("latin-1")
            told = f"{int(size):,} bytes" if size.isdigit() else "larger than the limit"
            error = {
                "code": types.INVALID_REQUEST,
                "message": f"The request body is {told}; at most {limit:,} bytes are accepted.",
                "data": {"max_body_bytes": limit},
            }
            return await _answer(send, 413, {"jsonrpc": "2.0", "id": None, "error": error})
        if replaced:
            return None  # the SDK's own body for the answer already sent
        return await send(message)

    return wrapped


def body_limit() -> int:
    """The largest MCP request: the API's BRAIN_MAX_BODY_BYTES, or room for the largest original
    `material_add` takes as base64 (the material services still hold the file itself to
    BRAIN_MATERIAL_MAX_MB)."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def principal_from_request(ctx):
    return ctx.request.scope[SCOPE_KEY]


def mcp_asgi_app():
    """The ASGI app serving `/mcp/` (its lifespan runs the SDK's session manager)."""
    server = build_server(principal_from_request)
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=body_limit(),
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return BearerAuth(app)
