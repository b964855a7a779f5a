"""The streamable HTTP transport: the SDK's ASGI app behind Brain's bearer-token auth.

Stateless and JSON-answering: every POST carries its own token and gets one JSON answer, so any
web process (and any number of them, on any host) serves any request with no session to keep —
the same as the REST API. The token is checked before the SDK sees the request, by the API's
own lookup (`knowledge.principals.auth.token_authenticate`, bad-token throttle included): a
missing or bad token is a 401, a throttled address a 429 with Retry-After, a token that is not an
agent's a 403, each with a JSON error body that says "invalid or missing Brain agent token" and a
WWW-Authenticate challenge pointing at the Protected Resource Metadata (RFC 9728, served by
`metadata_app`), which names no authorization server: clients learn there is no OAuth flow. DNS-rebinding protection (a browser on the user's machine
reaching a local server) is off because no request gets in without a bearer token, which a
browser never adds by itself; the Host header is still held to ALLOWED_HOSTS
(`allowed_hosts_only`), as Django holds its own paths, and Brain's origin in the metadata and
the challenge comes from configuration, never from that header."""

import json
import logging
import math
from types import SimpleNamespace

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.db import close_old_connections
from django.http import HttpRequest
from mcp import types
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework import exceptions

from knowledge.principals.auth import token_authenticate
from knowledge.web import api_exception_handler
from memory.mcp.server import build_server

PATH = "/mcp/"
SCOPE_KEY = "brain.principal"
disallowed_host_log = logging.getLogger("django.security.DisallowedHost")


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


# What a client that meets a 401 or 403 reads, in the body and in WWW-Authenticate: Brain's agent
# tokens are its own, issued in the console, not by an OAuth authorization server.
TOKEN_PROBLEM = "invalid or missing Brain agent token"
TOKEN_PROBLEM_SENTENCE = TOKEN_PROBLEM[0].upper() + TOKEN_PROBLEM[1:]
METADATA_PATH = "/.well-known/oauth-protected-resource"


def _origin() -> str:
    """Brain's own origin, from configuration (BRAIN_PUBLIC_URL, see brainsite/settings.py),
    never from the request: a Host header is the client's to write, and what it wrote would be
    handed back to every client reading the metadata (cached for an hour)."""
    return settings.BRAIN_PUBLIC_URL


def _quoted(value: str) -> str:
    """`value` as an RFC 9110 quoted-string: a `"` or `\\` is escaped and control characters
    dropped, so no value can close the string and add a parameter of its own."""
    kept = "".join(c for c in value if c == "\t" or (c >= " " and c != "\x7f"))
    return '"' + kept.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _challenge(*, invalid: bool) -> str:
    """RFC 6750's challenge with RFC 9728's pointer to the resource metadata (no `error` code
    when no token was given at all, as RFC 6750 §3.1 asks)."""
    params = {"realm": "brain"}
    if invalid:
        params["error"] = "invalid_token"
    params["error_description"] = TOKEN_PROBLEM
    params["resource_metadata"] = f"{_origin()}{METADATA_PATH}{PATH.rstrip('/')}"
    return "Bearer " + ", ".join(f"{name}={_quoted(value)}" for name, value in params.items())


def _host_allowed(scope) -> bool:
    """Django's own ALLOWED_HOSTS check (`HttpRequest.get_host`, with its DEBUG and
    USE_X_FORWARDED_HOST rules) for a request Django itself does not see."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    server_name, server_port = scope.get("server") or ("localhost", 80)
    request = HttpRequest()
    request.META = {"SERVER_NAME": server_name, "SERVER_PORT": str(server_port or 80)}
    if "host" in headers:
        request.META["HTTP_HOST"] = headers["host"]
    if "x-forwarded-host" in headers:
        request.META["HTTP_X_FORWARDED_HOST"] = headers["x-forwarded-host"]
    try:
        request.get_host()
    except DisallowedHost as exc:
        disallowed_host_log.error(str(exc))
        return False
    return True


def allowed_hosts_only(app):
    """ASGI middleware: the paths served beside Django (`/mcp/`, its metadata, the OAuth
    discovery answers) held to ALLOWED_HOSTS as Django's own paths are: another host gets the
    400 Django gives, in JSON."""

    async def checked(scope, receive, send):
        if scope["type"] == "http" and not _host_allowed(scope):
            return await _answer(
                send, 400, {"error": "Bad Request: this host is not one Brain serves (ALLOWED_HOSTS)."}
            )
        return await app(scope, receive, send)

    return checked


def resource_metadata() -> dict:
    """OAuth 2.0 Protected Resource Metadata (RFC 9728) for `/mcp/`: bearer tokens in the
    Authorization header, from Brain's own token store; no authorization server is named, because
    none issues them (an admin does, in the console or with `manage.py createagent`)."""
    origin = _origin()
    return {
        "resource": f"{origin}{PATH}",
        "resource_name": "Brain MCP server",
        "bearer_methods_supported": ["header"],
        "authorization_servers": [],
        "resource_documentation": f"{origin}/api/docs/",
        "brain_token_issuer": "Brain's own token store: an admin creates an agent's API token in the "
        "console (People & tokens) or with `manage.py createagent`; send it as 'Authorization: Bearer <token>'. There is no OAuth "
        "flow.",
    }


async def metadata_app(scope, receive, send):
    """Serves `/.well-known/oauth-protected-resource` (and the path-suffixed form RFC 9728 §3.1
    derives from `/mcp/`)."""
    if scope.get("method") not in ("GET", "HEAD"):
        return await _answer(send, 405, {"error": "Use GET."}, {"Allow": "GET, HEAD"})
    return await _answer(send, 200, resource_metadata(), {"Cache-Control": "max-age=3600"})


# Where an OAuth client looks for an authorization server when the metadata names none (it falls
# back to the resource's own origin): answered with JSON that says there is none, so such a client
# shows that instead of an HTML 404 page.
OAUTH_PATHS = (
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
    "/register",
    "/authorize",
    "/token",
)


def is_oauth_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in OAUTH_PATHS)


async def no_oauth_app(scope, receive, send):
    return await _answer(
        send,
        404,
        {
            "error": "not_found",
            "error_description": "Brain has no OAuth authorization server: agent tokens come from Brain's "
            "own token store (an admin creates them). Send one as 'Authorization: Bearer <token>'.",
        },
    )


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
                {"error": f"{TOKEN_PROBLEM_SENTENCE}: use the header 'Authorization: Bearer <token>'."},
                {"WWW-Authenticate": _challenge(invalid=False)},
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
            body = dict(response.data)
            extra = {k: v for k, v in response.items() if k.lower() == "retry-after"}
            if response.status_code == 401:
                body["error"] = f"{TOKEN_PROBLEM_SENTENCE}: {body['error']}"
                extra["WWW-Authenticate"] = _challenge(invalid=True)
            return await _answer(send, response.status_code, body, extra)
        if not principal.is_agent:
            return await _answer(
                send,
                403,
                {"error": f"{TOKEN_PROBLEM_SENTENCE}: the MCP server serves agent tokens only."},
                {"WWW-Authenticate": _challenge(invalid=True)},
            )
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
    from knowledge.materials.services import max_bytes

    as_base64 = math.ceil(max_bytes() / 3) * 4 + REQUEST_ENVELOPE
    return max(settings.DATA_UPLOAD_MAX_MEMORY_SIZE, as_base64)


# Room for the JSON-RPC request around a material_add's base64 file.
REQUEST_ENVELOPE = 64 * 1024


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
