import re
import uuid

from django.conf import settings
from django.http import JsonResponse

from knowledge.audit import services as audit

# What of a sent X-Request-Id is kept: letters, digits and . _ : - (no spaces or line breaks, so
# a logged id cannot end a log line or fake another one), at most 64 characters.
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9._:-]")


def request_ids(sent: str | None) -> tuple[str, str]:
    """(Brain's request id, the caller's) for a request whose X-Request-Id header is `sent`.
    Brain's id is its own unless BRAIN_PROXY_HOPS says a proxy in front sets the header, in
    which case the proxy's id is Brain's too; a client's id is only ever kept beside it
    (`client_request_id` in the log line), never instead, so a client cannot choose the id of
    its log lines and audit events."""
    cleaned = _UNSAFE_ID.sub("", sent or "")[:64]
    if cleaned and settings.BRAIN_PROXY_HOPS > 0:
        return cleaned, ""
    return uuid.uuid4().hex, cleaned


class RequestIdMiddleware:
    """Give every request an id (request_ids); audit events carry it, responses send it as
    X-Request-Id, and the caller's own is kept on the request as `client_request_id`."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        rid, request.client_request_id = request_ids(request.headers.get("X-Request-Id"))
        token = audit.current_request_id.set(rid)
        try:
            response = self.get_response(request)
        finally:
            audit.current_request_id.reset(token)
        response["X-Request-Id"] = rid
        return response


class ApiNulCharacterMiddleware:
    """PostgreSQL text cannot hold a NUL character, so an API path or query parameter carrying
    one could only fail deep inside a query. Under /api/ such a path names nothing (404) and such
    a parameter is invalid (400), both as JSON."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            if "\x00" in request.path:
                return JsonResponse({"error": "Not found."}, status=404)
            bad = sorted({k for k, v in request.GET.lists() if "\x00" in k or any("\x00" in x for x in v)})
            if bad:
                message = ["Null characters are not allowed."]
                return JsonResponse({"error": "invalid", "fields": {k: message for k in bad}}, status=400)
        return self.get_response(request)
