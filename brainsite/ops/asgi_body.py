"""Read a request's whole body on the event loop before Django's thread pool sees the request.

Django runs as WSGI in a small pool of threads per web process (brainsite/asgi.py), and a WSGI
view reads its body synchronously: without this, a client that sends its headers and then
trickles (or never sends) the body holds a pool thread for as long as it likes, and a handful of
such clients leave no thread for anyone else. Here waiting for a body costs a coroutine, not a
thread. A body that has not arrived within BRAIN_BODY_TIMEOUT_SECONDS gets 408; one past the
body limit is handed on at once, so Django answers its 413 (knowledge.web.BodySizeMiddleware)."""

import asyncio
import json


def buffer_body(app, *, max_bytes: int, timeout: float):
    async def buffered(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        messages, size = [], 0
        try:
            async with asyncio.timeout(timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None  # the client left; nothing to answer
                    messages.append(message)
                    size += len(message.get("body", b""))
                    if not message.get("more_body") or size > max_bytes:
                        break
        except TimeoutError:
            body = json.dumps({"error": "The request body did not arrive in time."}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 408,
                    "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return None

        async def replay():
            if messages:
                return messages.pop(0)
            return await receive()

        return await app(scope, replay, send)

    return buffered
