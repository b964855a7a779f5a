"""Errors: one exception per kind of refusal, each carrying the API's message and JSON body.

Brain answers every error with JSON: `{"error": "<message>", ...}`, and for invalid input
`{"error": "invalid", "fields": {"<field>": ["<message>", ...]}}`."""

from __future__ import annotations

from typing import Any


class BrainError(Exception):
    """An error answer from Brain (or no answer at all: `status` 0)."""

    def __init__(self, status: int, message: str, body: Any = None, headers: dict | None = None):
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.body = body if body is not None else {}
        self.headers = headers or {}


class BadRequest(BrainError):
    """400: invalid input; nothing was written. `fields` maps each field to its messages."""

    @property
    def fields(self) -> dict[str, list[str]]:
        fields = self.body.get("fields") if isinstance(self.body, dict) else None
        return fields if isinstance(fields, dict) else {}


class Unauthorized(BrainError):
    """401: no token, or an unknown or revoked one."""


class Forbidden(BrainError):
    """403: this token may not do that (another agent's store, a DM it does not belong to, …)."""


class NotFound(BrainError):
    """404: no such object this token may see."""


class Conflict(BrainError):
    """409: the current state does not allow it (already finished, changed meanwhile, a
    near-duplicate lesson, strict anti-drift, …). The body names what conflicts."""


class PayloadTooLarge(BrainError):
    """413: the body is over the server's limit."""


class RateLimited(BrainError):
    """429: too many requests (for instance bad tokens from this address); `retry_after` is
    the server's Retry-After in seconds."""

    @property
    def retry_after(self) -> float | None:
        return _seconds(self.headers.get("retry-after"))


class ServerError(BrainError):
    """5xx: the server failed; for writes, whether anything was stored is unknown."""


BY_STATUS = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: RateLimited,
}


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def error_for(status: int, body: Any, headers: dict) -> BrainError:
    if isinstance(body, dict):
        message = body.get("error")
        if message == "invalid" and isinstance(body.get("fields"), dict):
            message = "; ".join(
                f"{name}: {' '.join(map(str, msgs if isinstance(msgs, list) else [msgs]))}"
                for name, msgs in body["fields"].items()
            )
        message = str(message if message is not None else body)
    else:
        message = str(body) if body else f"HTTP {status}"
    cls = BY_STATUS.get(status) or (ServerError if status >= 500 else BrainError)
    return cls(status, message, body, headers)
