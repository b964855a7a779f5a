"""One log line per request: method, path, status and duration, with the response's request id."""

import logging
import time

logger = logging.getLogger("brain.request")


class RequestLogMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        logger.info(
            "%s %s %s %.1fms",
            request.method,
            request.get_full_path()[:300],
            response.status_code,
            (time.perf_counter() - started) * 1000,
            extra={"request_id": response.get("X-Request-Id") or request.headers.get("X-Request-Id", "-")},
        )
        return response
