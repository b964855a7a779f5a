import uuid

from django.http import JsonResponse

from knowledge.audit import services as audit


class RequestIdMiddleware:
    """Give every request an id (X-Request-Id if the caller sent one); audit events carry it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        rid = request.headers.get("X-Request-Id", "")[:64] or uuid.uuid4().hex
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
