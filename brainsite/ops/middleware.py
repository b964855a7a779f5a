"""One log line per request: method, path, status and duration, with Brain's request id (the one
the response carries) and, after it, the id the client sent, if any (`client_request_id=`)."""

import logging
import time

from brainsite.ops.errors import commit_counts

logger = logging.getLogger("brain.request")


class RequestLogMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        # What this request commits is counted from here (brainsite.ops.errors.written_since).
        request.brain_commits = commit_counts()
        response = self.get_response(request)
        request_log(
            request.method,
            request.get_full_path()[:300],
            response.status_code,
            started,
            request_id=response.get("X-Request-Id") or "-",
            client_request_id=getattr(request, "client_request_id", ""),
        )
        return response


def request_log(
    method: str, path: str, status: int, started: float, *, request_id: str, client_request_id: str
):
    """The one `brain.request` line of a request (Django's and MCP's alike)."""
    client = f" client_request_id={client_request_id}" if client_request_id else ""
    logger.info(
        "%s %s %s %.1fms%s",
        method,
        path,
        status,
        (time.perf_counter() - started) * 1000,
        client,
        extra={"request_id": request_id},
    )
