import json
import re
from urllib.parse import urlsplit

from django import template

from knowledge.principals.views import safe_next

register = template.Library()


@register.filter
def page_url(request) -> str:
    """The page a form on this page sends the reviewer back to (its `next`): the page itself for
    a GET; for a part rendered in answer to a POST (a card after a decision), the page the
    decision was made on, which htmx names in HX-Current-URL and a plain form posted as `next`.
    Never the POST's own URL, which answers no GET."""
    if request.method == "GET":
        return request.get_full_path()
    current = request.htmx.current_url if getattr(request, "htmx", None) else ""
    if current:
        parts = urlsplit(current)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
    else:
        target = request.POST.get("next", "")
    return safe_next(request, target, "review-queue")


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


def _attr(source, name):
    return source.get(name) if isinstance(source, dict) else getattr(source, name, None)


@register.filter
def source_href(source) -> str:
    """Where a source reference opens in the console: a conversation or message → the transcript
    around it (memory_browse), a material → its page (and section), a memory or entry → its
    page, a ticket, KB article or record → the state its owning system last pushed. "" when
    there is nothing to open (a task outcome, a malformed ref)."""
    from django.urls import NoReverseMatch, reverse

    kind, ref = _attr(source, "kind"), str(_attr(source, "ref") or "")
    try:
        if kind in ("conversation", "message") and ref.isdigit():
            return reverse("recall-browse", args=[kind, int(ref)])
        if kind == "memory" and ref.isdigit():
            return reverse("memory-detail", args=[int(ref)])
        if kind == "entry" and ref.isdigit():
            return reverse("entry-edit", args=[int(ref)])
        if kind == "material":
            base, _, section = ref.partition("#")
            pk = int(base) if base.isdigit() else _material_by_connector_ref(base)
            if pk is None:
                return ""
            return reverse("material-page", args=[pk]) + (f"#section-{section}" if section.isdigit() else "")
        if kind in ("ticket", "kb", "record") and ref:
            return reverse("source-state", args=[kind, ref])
    except NoReverseMatch:
        return ""
    return ""


def _material_by_connector_ref(ref: str):
    from knowledge.models import Material

    connector, _, external = ref.partition(":")
    if not connector or not external:
        return None
    return (
        Material.objects.filter(connector=connector, external_ref=external)
        .values_list("pk", flat=True)
        .first()
    )
