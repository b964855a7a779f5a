"""The answer while the database is away: 503 with Retry-After instead of a 500 page — JSON
under /api/, /mcp and /healthz, a short plain page on the console. Each request reconnects
(CONN_HEALTH_CHECKS), so service resumes on its own once the database is back."""

import sys

from django import db
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.defaults import server_error as django_server_error

RETRY_AFTER_SECONDS = 5
MESSAGE = "The database is unavailable; nothing was written. Try again shortly."


def is_database_away(exc: BaseException | None) -> bool:
    return isinstance(exc, db.OperationalError | db.InterfaceError)


def database_unavailable(request) -> HttpResponse:
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if request.path.startswith(("/api/", "/mcp", "/healthz")):
        return JsonResponse({"error": "database_unavailable", "detail": MESSAGE}, status=503, headers=headers)
    return HttpResponse(MESSAGE, status=503, content_type="text/plain; charset=utf-8", headers=headers)


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
