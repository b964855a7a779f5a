"""The answer while the database is away: 503 with Retry-After instead of a 500 page — JSON
under /api/, /mcp and /healthz, a short plain page on the console. Each request reconnects
(CONN_HEALTH_CHECKS), so service resumes on its own once the database is back.

The answer tells the truth about what the request wrote: the database can go away after a
write committed (while the answer is read back, or in an after-commit hook), or in the middle of
the COMMIT itself. The connection counts its commits (brainsite.postgres.base), the request log
middleware notes the count when a request starts, and the 503 says "nothing was written" only
when no commit happened since; otherwise that the changes are stored, or that no one can tell
(`written`: false, true or null)."""

import sys

from django import db
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.defaults import server_error as django_server_error

RETRY_AFTER_SECONDS = 5
MESSAGE = "The database is unavailable; nothing was written. Try again shortly."
STORED = (
    "The database became unavailable after this request's changes were committed: they are stored. "
    "Read them back instead of sending the write again."
)
UNKNOWN = (
    "The database became unavailable while this request's changes were being committed: they may or "
    "may not be stored. Read them back before sending the write again."
)


def commit_counts() -> tuple[int, int]:
    """(commits, commits without an answer) of this thread's database connection so far."""
    connection = db.connections["default"]
    return getattr(connection, "commits", 0), getattr(connection, "commits_unanswered", 0)


def written_since(request) -> bool | None:
    """Whether the request committed anything before the database went away: False, True, or
    None when a COMMIT got no answer."""
    start = getattr(request, "brain_commits", None)
    if start is None:
        return False
    commits, unanswered = commit_counts()
    if unanswered > start[1]:
        return None
    return commits > start[0]


def is_database_away(exc: BaseException | None) -> bool:
    return isinstance(exc, db.OperationalError | db.InterfaceError)


def database_unavailable(request) -> HttpResponse:
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    written = written_since(request)
    message = {False: MESSAGE, True: STORED, None: UNKNOWN}[written]
    if request.path.startswith(("/api/", "/mcp", "/healthz")):
        body = {"error": "database_unavailable", "detail": message, "written": written}
        return JsonResponse(body, status=503, headers=headers)
    return HttpResponse(message, status=503, content_type="text/plain; charset=utf-8", headers=headers)


def server_error(request, template_name="500.html"):
    """handler500: Django calls it inside the `except` of the request that failed."""
    if is_database_away(sys.exc_info()[1]):
        return database_unavailable(request)
    try:
        # The console's 500 page has the site shell (navigation, the signed-in user), so it is
        # rendered with the request; if that fails too, Django's context-free page answers.
        return render(request, template_name, status=500)
    except Exception:
        return django_server_error(request, template_name)
