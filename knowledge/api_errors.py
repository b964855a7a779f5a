"""JSON errors for every API failure."""

from django.http import Http404, JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from knowledge.errors import DomainError, Invalid


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


class Conflict(exceptions.APIException):
    """409: the object changed since the caller read it (or a restore would overwrite a later
    change); nothing was written."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object changed since you read it; nothing was written."
    default_code = "conflict"


def error_text(exc: Exception) -> str:
    """One line for a person: the messages of a ValidationError (or any API error), joined."""
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


def not_found(request, exception):
    """404 for a URL no view answers: JSON under /api/ (a malformed id, a misspelt path), the
    console's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "Not found."}, status=404)
    return page_not_found(request, exception)
