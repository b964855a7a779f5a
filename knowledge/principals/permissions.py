"""DRF permission classes and console decorators, both reading the one Principal type."""

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

from knowledge.principals.principal import Principal


class IsReviewer(BasePermission):
    message = "Reviewers and admins only."

    def has_permission(self, request, view):
        return isinstance(request.user, Principal) and request.user.is_reviewer


class IsAdmin(BasePermission):
    message = "Admins only."

    def has_permission(self, request, view):
        return isinstance(request.user, Principal) and request.user.is_admin


class IsAgentOrReviewer(BasePermission):
    message = "Agents, reviewers and admins only."

    def has_permission(self, request, view):
        p = request.user
        return isinstance(p, Principal) and (p.is_agent or p.is_reviewer)


class IsIntegrationOrAdmin(BasePermission):
    message = "Integrations and admins only."

    def has_permission(self, request, view):
        p = request.user
        return isinstance(p, Principal) and (p.is_integration or p.is_admin)


def console_principal(request) -> Principal:
    return Principal.for_user(request.user)


def _role_required(check):
    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            principal = console_principal(request)
            if not check(principal):
                raise PermissionDenied("Your role does not allow this page.")
            request.principal = principal
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


reviewer_required = _role_required(lambda p: p.is_reviewer)
admin_required = _role_required(lambda p: p.is_admin)
