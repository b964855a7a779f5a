"""Throttling of failed authentication, for the console and the API alike.

- Console logins: django-axes counts failures per (username, client address) and locks the pair
  out for a while (settings.AXES_*); every failed login and every refused attempt during a
  lockout is audited here (`auth.login_failed`, `auth.locked_out`), without the password.
- API: bad bearer tokens are counted per client address and minute in PostgreSQL (one upsert,
  so every web process shares the count); past `BRAIN_API_BAD_TOKENS_PER_MINUTE` the API answers
  429 with Retry-After instead of 401 until the minute is over. A valid token is never slowed:
  the count is only read when a token was not found, so an agent behind the same address as an
  attacker keeps working, and the hot path of every request pays nothing."""

import ipaddress
import time

from django.conf import settings
from django.db import connection, transaction

from knowledge.audit.services import audit_record
from knowledge.principal import Principal

WINDOW_SECONDS = 60


def client_ip(request) -> str | None:
    """The caller's address: REMOTE_ADDR, or with BRAIN_PROXY_HOPS trusted proxies in front, the
    address the outermost trusted proxy saw (counted from the right of X-Forwarded-For, so a
    client cannot choose its own address by sending the header). None when there is none."""
    hops = settings.BRAIN_PROXY_HOPS
    if hops > 0:
        forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
        if len(forwarded) >= hops and _is_ip(forwarded[-hops]):
            return forwarded[-hops]
    address = request.META.get("REMOTE_ADDR")
    return address if address and _is_ip(address) else None


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def bad_token_record(request) -> int | None:
    """Count one bad token from the caller's address; return the seconds to wait when the
    address is past its limit for this minute, else None."""
    now = time.time()
    window = int(now // WINDOW_SECONDS)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_authfailure (address, time_window, count) VALUES (%s, %s, 1) "
            "ON CONFLICT (address, time_window) DO UPDATE SET count = knowledge_authfailure.count + 1 "
            "RETURNING count",
            [client_ip(request) or "unknown", window],
        )
        (count,) = cursor.fetchone()
        if count == 1:  # the first failure of a window clears windows that are over
            cursor.execute("DELETE FROM knowledge_authfailure WHERE time_window < %s", [window - 1])
    if count > settings.BRAIN_API_BAD_TOKENS_PER_MINUTE:
        return max(1, int((window + 1) * WINDOW_SECONDS - now + 0.999))
    return None


# --- console logins (django-axes signals) ------------------------------------------------------


def _audit_login(action: str, request, username: str | None, reason: str) -> None:
    with transaction.atomic():
        audit_record(
            action,
            actor=Principal(kind="person", name=(username or "")[:150] or "(no username)"),
            object_type="login",
            object_ids=[client_ip(request) or "unknown"] if request is not None else [],
            reason=reason,
        )


def on_login_failed(sender, credentials=None, request=None, **kwargs):
    username = (credentials or {}).get("username")
    if request is not None and getattr(request, "axes_locked_out", False):
        return  # audited as auth.locked_out
    _audit_login("auth.login_failed", request, username, "wrong username or password")


def on_locked_out(sender, request=None, username=None, ip_address=None, **kwargs):
    _audit_login(
        "auth.locked_out",
        request,
        username,
        f"{settings.AXES_FAILURE_LIMIT} failed logins: locked out for "
        f"{round(settings.AXES_COOLOFF_TIME * 60)} minutes",
    )
