"""API authentication: Authorization: Bearer <token>."""

from django.db import connection
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from knowledge import rowsql
from knowledge.models import Agent, ApiToken
from knowledge.models.principals import hash_token
from knowledge.principal import Principal
from knowledge.principals.throttle import bad_token_record

# last_used_at is written at most this often per token, so a busy agent does not turn every
# request into an extra UPDATE.
LAST_USED_RESOLUTION_SECONDS = 60


# In the model's field order, as Model.from_db expects them.
TOKEN_FIELDS = [
    f.attname
    for f in ApiToken._meta.concrete_fields
    if f.attname in {"id", "agent_id", "user_id", "integration_id", "last_used_at"}
]


def token_lookup(key_hash: str) -> ApiToken | None:
    """The live token with this hash, its agent loaded with it (agents are the hot path; a
    user's or an integration's row loads when used). Hand-written SQL because it runs on every
    API request and the ORM's compilation of it cost ≈ 1 ms of CPU; the rows are built with
    `from_db`, as the ORM builds them."""
    sql = (
        f"SELECT {', '.join(f't.{c}' for c in TOKEN_FIELDS)}, {rowsql.columns(Agent, 'a')} "
        f"FROM {ApiToken._meta.db_table} t LEFT JOIN {Agent._meta.db_table} a ON a.id = t.agent_id "
        f"WHERE t.key_hash = %s AND t.revoked_at IS NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    token = ApiToken.from_db(connection.alias, TOKEN_FIELDS, row[: len(TOKEN_FIELDS)])
    if token.agent_id is not None:
        token.agent = rowsql.from_row(Agent, row[len(TOKEN_FIELDS) :])
    return token


def token_authenticate(raw: str, request) -> tuple[Principal, ApiToken]:
    """The principal a raw bearer token stands for, for every door that takes one (the REST API,
    the MCP server over HTTP and stdio). An unknown token counts against the caller's address
    (`request.META`); past the limit it is `Throttled` (429 with Retry-After), else
    `AuthenticationFailed`."""
    token = token_lookup(hash_token(raw))
    if token is None:
        wait = bad_token_record(request)
        if wait is not None:
            raise exceptions.Throttled(wait, detail="Too many bad tokens from your address.")
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


class BearerTokenAuthentication(BaseAuthentication):
    keyword = b"bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword or len(header) != 2:
            raise exceptions.AuthenticationFailed("Use the header 'Authorization: Bearer <token>'.")
        return token_authenticate(header[1].decode(errors="replace"), request)

    def authenticate_header(self, request):
        return 'Bearer realm="brain"'
