"""What every request passes before a view: the body-size limit and the API's JSON parser.

Bad input gets a clear error and reaches no view: a body over BRAIN_MAX_BODY_BYTES is answered
413 (JSON under /api/) naming the limit, and JSON that nests deeper than MAX_JSON_DEPTH levels
is a 400 — never a RecursionError — as is a NUL character in any text."""

import functools

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse
from rest_framework import parsers
from rest_framework.exceptions import ParseError, ValidationError

from knowledge.limits import MAX_JSON_DEPTH, json_scan

# A refused body is still read (and thrown away) up to this size, so the client, which sends
# its whole body before reading the answer, gets the 413 instead of a broken connection.
DRAIN_LIMIT = 64 * 1024 * 1024
DRAIN_CHUNK = 64 * 1024


def _too_large(request, size: int | None) -> HttpResponse:
    limit = body_limit(request)
    told = f"{size:,} bytes" if size is not None else "larger than the limit"
    message = f"The request body is {told}; at most {limit:,} bytes are accepted."
    if request.path.startswith("/api/"):
        response = JsonResponse({"error": message, "max_body_bytes": limit}, status=413)
    else:
        response = HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")
    response["Connection"] = "close"
    return response


def _drain(request, size: int) -> None:
    stream = request.META.get("wsgi.input")
    left = min(size, DRAIN_LIMIT)
    while stream is not None and left > 0:
        chunk = stream.read(min(DRAIN_CHUNK, left))
        if not chunk:
            break
        left -= len(chunk)


# Where originals are uploaded: bodies there are held to BRAIN_MATERIAL_MAX_MB (plus room for
# the multipart envelope) instead; the material services refuse an original over the limit.
UPLOAD_PATHS = ("/api/materials", "/api/connectors/", "/knowledge/materials/")
UPLOAD_ENVELOPE = 1024 * 1024


def body_limit(request) -> int | None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if request.path.startswith(UPLOAD_PATHS) and request.method in ("POST", "PUT"):
        upload = settings.BRAIN_MATERIAL_MAX_MB * 1024 * 1024 + UPLOAD_ENVELOPE
        return max(limit or 0, upload)
    return limit


class BodySizeMiddleware:
    """Refuse a body over the limit before any view reads it (Content-Length), or when a body
    without one turns out too large while it is read (RequestDataTooBig)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = body_limit(request)
        try:
            size = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0
        if limit is not None and size > limit:
            _drain(request, size)
            return _too_large(request, size)
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, RequestDataTooBig):
            return _too_large(request, None)
        return None


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing JSON nested deeper than MAX_JSON_DEPTH levels."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels.")
        depth, nul = json_scan(data)
        if depth > MAX_JSON_DEPTH:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels.")
        if nul:
            raise ParseError(
                "JSON parse error - a text holds a NUL character (\\u0000), which is never stored."
            )
        return data


def no_body(view):
    """For API views that take no body: a body with fields is a 400 naming them (an action
    called with options it does not have must not look as if it took them)."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        data = request.data
        if data:
            names = sorted(data) if isinstance(data, dict) else ["body"]
            raise ValidationError({name: ["Unknown field."] for name in names})
        return view(request, *args, **kwargs)

    return wrapped
