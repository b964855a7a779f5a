import uuid

from knowledge import audit


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
