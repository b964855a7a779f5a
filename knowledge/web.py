"""The web layer shared by every API and console view: what every request passes before a view
(the body-size limit and the API's JSON parser), the strict serializer fields, the API's
exception handler and the console's error helper.

Bad input gets a clear error and reaches no view: a body over BRAIN_MAX_BODY_BYTES is answered
413 (JSON under /api/) naming the limit, and JSON that nests deeper than MAX_JSON_DEPTH levels
is a 400 — never a RecursionError — as is a NUL character in any text."""

import functools
import json
from contextlib import contextmanager

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.handlers.exception import response_for_exception
from django.http import Http404, HttpResponse, JsonResponse
from django.views.defaults import bad_request as django_bad_request
from django.views.defaults import page_not_found
from rest_framework import exceptions, parsers, serializers, status
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler

from knowledge.errors import Conflict, DomainError, Gone, Invalid, NotFound, Refused
from knowledge.limits import (
    AGENT_FILE_MAX_BYTES,
    MAX_JSON_DEPTH,
    MAX_OFFSET,
    MAX_PAGE,
    json_scan,
    json_size_error,
)

# A refused body is still read (and thrown away) up to this size, so the client, which sends
# its whole body before reading the answer, gets the 413 instead of a broken connection.
DRAIN_LIMIT = 64 * 1024 * 1024
DRAIN_CHUNK = 64 * 1024


def too_large_body(path: str, limit: int, size: int | None) -> tuple[str, bytes]:
    """(content type, body) of the 413 for a body of `size` bytes (None: not known) over
    `limit`: JSON naming the limit under /api/, a sentence elsewhere. The ASGI body reader
    (brainsite/ops/asgi_body.py) answers with the same."""
    told = f"{size:,} bytes" if size is not None else "larger than the limit"
    message = f"The request body is {told}; at most {limit:,} bytes are accepted."
    if path.startswith("/api/"):
        return "application/json", json.dumps({"error": message, "max_body_bytes": limit}).encode()
    return "text/plain; charset=utf-8", message.encode()


def _too_large(request, size: int | None) -> HttpResponse:
    content_type, body = too_large_body(request.path, body_limit(request), size)
    response = HttpResponse(body, status=413, content_type=content_type)
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
# The console's agent-file import takes files up to AGENT_FILE_MAX_BYTES: held to the ordinary
# body limit, a file the import page accepts was refused before it (a plain-text 413 at 5 MB).
AGENT_FILE_PATH = "/agents/import"


def is_upload(path: str, method: str) -> bool:
    return (path.startswith(UPLOAD_PATHS) or path == AGENT_FILE_PATH) and method in ("POST", "PUT")


def body_limit_for(path: str, method: str) -> int | None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if path == AGENT_FILE_PATH and method == "POST":
        return max(limit or 0, AGENT_FILE_MAX_BYTES + UPLOAD_ENVELOPE)
    if is_upload(path, method):
        upload = settings.BRAIN_MATERIAL_MAX_MB * 1024 * 1024 + UPLOAD_ENVELOPE
        return max(limit or 0, upload)
    return limit


def body_limit(request) -> int | None:
    return body_limit_for(request.path, request.method)


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


def validated(serializer_class, data, *, partial: bool = False, **context) -> dict:
    """`data` checked by `serializer_class` (with `context`, `partial` for a PATCH): its
    validated data, or the serializer's ValidationError (the API's 400). The one helper every
    API view and MCP tool parses its input with."""
    serializer = serializer_class(data=data, partial=partial, context=context)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


# --- serializer fields shared by the APIs ---

# The name of an agent, person or channel as an API request carries it.
SLUG = r"^[-a-zA-Z0-9_]+$"


def iso_time(value) -> str | None:
    """A datetime as the API writes it (ISO 8601, UTC as Z)."""
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def times_out(obj) -> dict:
    """The two times of a memory, message, episode or entry, when it held first: `held_from` /
    `held_until` (a memory's validity, else when it was written; a message's `ts`; an episode's
    span; none for an entry, whose blocks carry theirs) and `learned_at`, when Brain learned it."""
    return {
        "held_from": iso_time(obj.held_from),
        "held_until": iso_time(obj.held_until),
        "learned_at": iso_time(obj.created_at),
    }


def times_fields() -> dict:
    """The serializer fields of `times_out`, for the API's schema."""
    return {
        "held_from": serializers.DateTimeField(
            allow_null=True,
            help_text="When it held, from: a memory's valid_from (else when it was written), a "
            "message's ts, an episode's start; null for an entry.",
        ),
        "held_until": serializers.DateTimeField(
            allow_null=True, help_text="When it stopped holding: a memory's valid_to, an episode's end."
        ),
        "learned_at": serializers.DateTimeField(help_text="When Brain learned it (the row's created_at)."),
    }


class StrictCharField(serializers.CharField):
    """Text that must arrive as a JSON string. DRF's CharField turns 5 or 1.5 into "5" and
    "1.5", so a client sending the wrong type would have it stored silently; this one answers
    400 instead. Used for the texts people and agents write (memories, messages, entries,
    queries); identifiers that may legitimately be numbers (a source's `ref`) stay lenient."""

    default_error_messages = {"not_a_string": "Must be a string, not {type}."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string", type=type(data).__name__ if data is not None else "null")
        return super().to_internal_value(data)


class StrictSerializer(serializers.Serializer):
    """An input serializer that refuses fields it does not declare: a misspelt field (`teir`) is
    a 400 naming it, never silently ignored. Every API input serializer derives from this."""

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                exc.detail.update({name: ["Unknown field."] for name in unknown})
            raise
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return value


class BoundedJSONField(serializers.JSONField):
    """A JSON value (memory `value`, entry `properties`) of at most 64 KiB and 32 levels."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        error = json_size_error(value)
        if error:
            raise serializers.ValidationError(error)
        return value


class BoundedDictField(BoundedJSONField):
    """A bounded JSON object."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError(f"Must be a JSON object, not {type(data).__name__}.")
        return super().to_internal_value(data)


# --- JSON errors for every API failure; one line for a person in the console ---


def api_exception_handler(exc, context):
    """Every API error is JSON: {"error": "...", "detail": ...}, with the right status code."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    if isinstance(exc, Invalid):
        return Response({"error": "invalid", "fields": exc.fields}, status=exc.status_code)
    if isinstance(exc, DomainError):
        return Response({"error": exc.message, **exc.extra}, status=exc.status_code)
    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    if isinstance(exc, exceptions.ValidationError):
        body = {"error": "invalid", "fields": detail}
    elif isinstance(detail, dict) and "detail" in detail:
        body = {"error": str(detail["detail"])}
        extra = {k: v for k, v in detail.items() if k != "detail"}
        body.update(extra)
    else:
        body = {"error": detail}
    if response.status_code == status.HTTP_401_UNAUTHORIZED and not response.has_header("WWW-Authenticate"):
        response["WWW-Authenticate"] = 'Bearer realm="brain"'
    return Response(body, status=response.status_code, headers=dict(response.items()))


def error_text(exc: Exception, *, fields: bool = False) -> str:
    """One line for a person: the messages of a ValidationError (or any API error), joined;
    with `fields`, a domain error's messages each name their field ("file: too large")."""
    if fields and isinstance(exc, DomainError):
        return exc.message
    detail = getattr(exc, "detail", None)
    if isinstance(detail, dict):
        if "detail" in detail:
            return str(detail["detail"])
        return "; ".join(
            str(m) for msgs in detail.values() for m in (msgs if isinstance(msgs, list) else [msgs])
        )
    if isinstance(detail, list):
        return "; ".join(str(m) for m in detail)
    return str(detail or exc)


# --- the console's answer to a domain error ---


def console_error(request, exc: DomainError) -> HttpResponse:
    """The one mapping of a domain error to a console response: NotFound is the 404 page and
    Refused the 403 page (through the project's handlers, exactly as if the view had raised
    Http404 / PermissionDenied), Gone a 410, and Invalid or Conflict that no form of the view
    showed a 400 / 409 naming what was wrong. Views that show an error beside a form catch it
    themselves and put `error_text(exc)` there."""
    if isinstance(exc, NotFound):
        return response_for_exception(request, Http404(exc.message))
    if isinstance(exc, Refused):
        return response_for_exception(request, PermissionDenied(exc.message))
    status_code = exc.status_code if isinstance(exc, (Gone, Conflict, Invalid)) else 400
    return HttpResponse(
        error_text(exc, fields=True), status=status_code, content_type="text/plain; charset=utf-8"
    )


class ConsoleWrite:
    """What `console_write` yields: set `done` after the write to say what it did."""

    def __init__(self, done: str):
        self.done = done
        self.ok = False


@contextmanager
def console_write(request, done: str = "", *, fields: bool = True):
    """A console form's write whose page redirects either way: a domain error becomes that
    page's error message (`error_text`; `fields`: Invalid messages name their field) — the write
    was refused and wrote nothing — and success the `done` message (set on the yielded object
    when it depends on what was written)."""
    write = ConsoleWrite(done)
    try:
        yield write
    except DomainError as exc:
        messages.error(request, error_text(exc, fields=fields))
    else:
        write.ok = True
        if write.done:
            messages.success(request, write.done)


class ConsoleErrorMiddleware:
    """Every console view's domain errors answered by `console_error`, so no view re-maps
    NotFound or Refused by hand. API views answer through `api_exception_handler` (DRF catches
    their errors before any middleware sees them)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, DomainError) and not request.path.startswith("/api/"):
            return console_error(request, exception)
        return None


def not_found(request, exception):
    """404 for a URL no view answers: JSON under /api/ (a malformed id, a misspelt path), the
    console's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "Not found."}, status=404)
    return page_not_found(request, exception)


def bad_request(request, exception):
    """400 for a request Django refuses before any view answers (a Host header the server does
    not serve, too many form fields): JSON under /api/, the console's page elsewhere. The reason
    is logged, not told: it may echo what the client sent."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "Bad request."}, status=400)
    return django_bad_request(request, exception)


# --- paging of list APIs ---
# Two parameter pairs, parsed here only: `page` / `page_size` (entries, audit, memories) and `limit` /
# `offset` (consolidation plans; DRF's LimitOffsetPagination reads the same pair where a list
# answers with next/previous links). Both refuse values PostgreSQL could not take.


def page_params(params, *, size_default: int = 25, size_most: int = 100) -> tuple[int, int]:
    """page and page_size from query parameters (`size_default` a page, at most `size_most`;
    page at most MAX_PAGE)."""
    try:
        page = int(params.get("page") or 1)
        size = int(params.get("page_size") or size_default)
    except ValueError:
        raise Invalid({"page": ["Whole numbers for page and page_size."]})
    if not 1 <= page <= MAX_PAGE or not 1 <= size <= size_most:
        raise Invalid({"page": [f"1 ≤ page ≤ {MAX_PAGE:,} and 1 ≤ page_size ≤ {size_most}."]})
    return page, size


def limit_offset(params, *, default: int = 50, most: int = 200) -> tuple[int, int]:
    """limit and offset from query parameters: limit `default` when absent and clamped to
    1…`most`, offset from 0; a non-number or an offset over MAX_OFFSET is Invalid."""
    try:
        limit = min(most, max(1, int(params.get("limit", default))))
        offset = max(0, int(params.get("offset", 0)))
    except ValueError:
        raise Invalid({"limit": ["limit and offset must be integers."]}) from None
    if offset > MAX_OFFSET:
        raise Invalid({"offset": [f"At most {MAX_OFFSET:,}."]})
    return limit, offset
