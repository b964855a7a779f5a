"""API authentication: Authorization: Bearer <token>."""

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from knowledge.models import ApiToken
from knowledge.models.principals import hash_token
from knowledge.principals import Principal

# last_used_at is written at most this often per token, so a busy agent does not turn every
# request into an extra UPDATE.
LAST_USED_RESOLUTION_SECONDS = 60


class BearerTokenAuthentication(BaseAuthentication):
    keyword = b"bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword or len(header) != 2:
            raise exceptions.AuthenticationFailed("Use the header 'Authorization: Bearer <token>'.")
        raw = header[1].decode(errors="replace")
        token = (
            ApiToken.objects.select_related("agent", "user", "integration")
            .filter(key_hash=hash_token(raw), revoked_at__isnull=True)
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        if token.agent_id:
            principal = Principal.for_agent(token.agent)
        elif token.user_id:
            if not token.user.is_active:
                raise exceptions.AuthenticationFailed("This user is disabled.")
            principal = Principal.for_user(token.user)
        else:
            principal = Principal.for_integration(token.integration)
        now = timezone.now()
        if (
            token.last_used_at is None
            or (now - token.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS
        ):
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return principal, token

    def authenticate_header(self, request):
        return 'Bearer realm="brain"'
