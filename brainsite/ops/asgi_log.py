"""The `brain.request` line for what Django does not serve: the MCP app at /mcp/ is ASGI, so
RequestLogMiddleware never sees its requests. This wrapper gives each one a request id the
same way (knowledge.middleware.request_ids), sends it back as X-Request-Id, and logs one line
with method, path, status and duration when the answer is sent."""

import time

from brainsite.ops.middleware import request_log
from knowledge.audit.services import current_request_id
from knowledge.middleware import request_ids


def log_requests(app):
    async def logged(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        started = time.perf_counter()
        sent = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        rid, client_rid = request_ids(sent)
        status = [500]  # what the line says when the app fails before answering

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, (b"x-request-id", rid.encode())]}
            await send(message)

        token = current_request_id.set(rid)
        try:
            return await app(scope, receive, send_with_id)
        finally:
            current_request_id.reset(token)
            path = scope.get("path", "")
            if scope.get("query_string"):
                path += "?" + scope["query_string"].decode("latin-1")
            request_log(
                scope.get("method", "-"),
                path[:300],
                status[0],
                started,
                request_id=rid,
                client_request_id=client_rid,
            )

    return logged
