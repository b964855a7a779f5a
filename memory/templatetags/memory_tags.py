import json
import re

from django import template

register = template.Library()

STATUS_BADGES = {"active": "ok", "queued": "warn", "rejected": "bad", "invalidated": "bad"}


@register.filter
def tojson(value) -> str:
    """A JSON value for display (autoescaped by the template like any other string)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@register.filter
def status_badge(status: str) -> str:
    return STATUS_BADGES.get(status, "")


@register.filter
def event_label(action: str) -> str:
    return action.removeprefix("memory.").replace("_", " ")


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def words(name: str) -> str:
    """A snake_case name as words, so a column header like keyword_knowledge can wrap."""
    return str(name).replace("_", " ")


ENV_HINT = re.compile(r"\s*\(BRAIN_[A-Z0-9_]+\)")


@register.filter
def for_people(reason: str) -> str:
    """A reason as a reviewer reads it: without the environment variable an operator would set
    (the console names its own page for that), e.g. "no base URL (BRAIN_MODEL_BASE_URL)"."""
    return ENV_HINT.sub("", str(reason or ""))
