"""Domain errors: what a service says when it refuses, independent of HTTP. The API's exception
handler (knowledge.web.api_exception_handler) turns them into JSON with the right status code; console views
show `error_text(exc)`. Each carries `detail` in the shape DRF's errors have, so both read them
the same way."""


class DomainError(Exception):
    """A refusal; nothing was written. `extra` is added to the JSON error body (ids, names)."""

    status_code = 400
    code = "error"
    default_message = "Refused; nothing was written."

    def __init__(self, message: str | None = None, **extra):
        message = message or self.default_message
        super().__init__(message)
        self.message = message
        self.extra = extra
        self.detail = {"detail": message, **extra}


class Invalid(DomainError):
    """Bad input: {field: [messages]}."""

    code = "invalid"

    def __init__(self, fields: dict[str, list[str] | str | dict]):
        self.fields = {
            name: [m] if isinstance(m, str) else m if isinstance(m, dict) else list(m)
            for name, m in fields.items()
        }
        super().__init__(
            "; ".join(
                f"{name}: {' '.join(map(str, msgs)) if isinstance(msgs, list) else msgs}"
                for name, msgs in self.fields.items()
            )
        )
        self.detail = self.fields


class Refused(DomainError):
    """The actor may not do this (403)."""

    status_code = 403
    code = "refused"


class NotFound(DomainError):
    """No such object the actor may see (404)."""

    status_code = 404
    code = "not_found"


class Gone(DomainError):
    """The object exists but what it points at is no longer there (410): a material whose stored
    original is missing from the material storage."""

    status_code = 410
    code = "gone"


class Conflict(DomainError):
    """The current state does not allow it (409): a rule of the domain, or a concurrent change."""

    status_code = 409
    code = "conflict"
