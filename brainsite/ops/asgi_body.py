"""Read a request's whole body on the event loop before Django's thread pool sees the request.

Django runs as WSGI in a small pool of threads per web process (brainsite/asgi.py), and a WSGI
view reads its body synchronously: without this, a client that sends its headers and then
trickles (or never sends) the body holds a pool thread for as long as it likes, and a handful of
such clients leave no thread for anyone else. Here waiting for a body costs a coroutine, not a
thread — for every body, uploads (multipart, up to BRAIN_MATERIAL_MAX_MB) included: a body that
stops arriving for BRAIN_BODY_TIMEOUT_SECONDS, or is not complete within its deadline (that
timeout for an ordinary body, BRAIN_UPLOAD_TIMEOUT_SECONDS for an upload), gets 408. A body over
its limit (knowledge.web.body_limit_for) is read and thrown away here, then answered 413 in the
shape Django's BodySizeMiddleware uses, so no thread ever waits on it either.

Bodies past SPOOL_BYTES (the ordinary body limit, which the reader always held in memory) wait in
a temporary file, so twenty stalled 20 MB uploads cost disk pages, not 400 MB of a web process."""

import asyncio
import json
import tempfile
import time

from knowledge.web import DRAIN_LIMIT, body_limit_for, is_upload, too_large_body

SPOOL_BYTES = 5 * 1024 * 1024
REPLAY_CHUNK = 256 * 1024


class _Stalled(Exception):
    pass


def _declared_length(scope) -> int | None:
    for name, value in scope.get("headers") or []:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _answer(send, status: int, content_type: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type.encode()), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": body})


def buffer_body(app, *, timeout: float, upload_timeout: float, spool_bytes: int = SPOOL_BYTES):
    async def buffered(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        path, method = scope.get("path", ""), scope.get("method", "GET")
        limit = body_limit_for(path, method)
        declared = _declared_length(scope)
        chunks, spool, size = [], None, 0
        too_large = limit is not None and declared is not None and declared > limit
        deadline = time.monotonic() + (upload_timeout if is_upload(path, method) else timeout)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Stalled
                try:
                    # A client that stops sending is found after `timeout` of silence, even
                    # within an upload's longer deadline.
                    async with asyncio.timeout(min(timeout, left)):
                        message = await receive()
                except TimeoutError:
                    raise _Stalled from None
                if message["type"] == "http.disconnect":
                    return None  # the client left; nothing to answer
                chunk = message.get("body", b"")
                size += len(chunk)
                if limit is not None and size > limit:
                    too_large = True
                if not too_large:
                    if spool is None and size > spool_bytes:
                        spool = tempfile.TemporaryFile()  # noqa: SIM115  (closed below)
                        spool.writelines(chunks)
                        chunks = []
                    if spool is not None:
                        spool.write(chunk)
                    else:
                        chunks.append(chunk)
                if not message.get("more_body"):
                    break
                if too_large and size > DRAIN_LIMIT:
                    break  # read this much of a refused body, no more
        except _Stalled:
            if spool is not None:
                spool.close()
            if too_large:  # it was refused anyway; say why rather than that it was slow
                content_type, body = too_large_body(path, limit, declared)
                return await _answer(send, 413, content_type, body)
            body = json.dumps({"error": "The request body did not arrive in time."}).encode()
            return await _answer(send, 408, "application/json", body)
        if too_large:
            if spool is not None:
                spool.close()
            content_type, body = too_large_body(path, limit, declared if declared is not None else size)
            return await _answer(send, 413, content_type, body)
        if spool is None:
            return await app(scope, _replay_chunks(chunks, receive), send)
        spool.seek(0)
        try:
            return await app(scope, _replay_file(spool, size, receive), send)
        finally:
            spool.close()

    return buffered


def _replay_chunks(chunks: list[bytes], receive):
    body = b"".join(chunks)
    done = False

    async def replay():
        nonlocal done
        if done:
            return await receive()
        done = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _replay_file(spool, size: int, receive):
    done = False

    async def replay():
        nonlocal done
        if done:
            return await receive()
        chunk = spool.read(REPLAY_CHUNK)
        done = spool.tell() >= size
        return {"type": "http.request", "body": chunk, "more_body": not done}

    return replay
