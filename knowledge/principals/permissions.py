"""DRF permission classes and console decorators: thin doors onto the access module's rules
(`access.require_role` and the Principal type's kinds), so a role is checked one way."""

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from rest_framework.permissions import BasePermission

from knowledge import access
from knowledge.principal import ADMIN, REVIEWER, Principal


class _Allows(BasePermission):
    """Lets in a principal of the kinds named here, or one holding `role` (an unauthenticated
    request is left to DRF's 401). `message` is the 403's text."""

    agents = integrations = False
    role: str | None = None

    def has_permission(self, request, view):
        p = request.user
        if not isinstance(p, Principal):
            return False
        return (
            (self.agents and p.is_agent)
            or (self.integrations and p.is_integration)
            or (self.role is not None and access.has_role(p, self.role))
        )


class IsReviewer(_Allows):
    role, message = REVIEWER, access.ROLE_REFUSALS[REVIEWER]


class IsAdmin(_Allows):
    role, message = ADMIN, access.ROLE_REFUSALS[ADMIN]


class IsAgentOrReviewer(_Allows):
    agents, role, message = True, REVIEWER, "Agents, reviewers and admins only."


class IsIntegrationOrAdmin(_Allows):
    integrations, role, message = True, ADMIN, "Integrations and admins only."


class IsAgentOrAdmin(_Allows):
    agents, role, message = True, ADMIN, "Agents and admins only."


class IsAgentIntegrationOrAdmin(_Allows):
    agents, integrations, role, message = True, True, ADMIN, "Agents, integrations and admins only."


def console_principal(request) -> Principal:
    return Principal.for_user(request.user)


def role_required(role: str):
    """A console view for people holding `role`: the login page for anyone signed out, the 403
    page (`access.require_role`'s Refused, through the console's error middleware) for anyone
    else. Sets `request.principal`."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            principal = console_principal(request)
            access.require_role(principal, role, "Your role does not allow this page.")
            request.principal = principal
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


reviewer_required = role_required(REVIEWER)
admin_required = role_required(ADMIN)
