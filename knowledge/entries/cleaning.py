"""Input cleaning for entries, blocks, relations and guides, shared by the entry services, the
API serializers, the console forms and other services that take the same kinds of text."""

import datetime

from knowledge.errors import Invalid
from knowledge.limits import MAX_MEMORY_TEXT
from knowledge.models import MemorySource

MAX_BLOCKS_PER_WRITE = 200
MAX_TEXT = MAX_MEMORY_TEXT  # a block is a memory: the one limit


def clean_text(value, field: str, *, max_length: int = MAX_TEXT, required: bool = True) -> str:
    value = (value or "").strip() if isinstance(value, str | type(None)) else None
    if value is None:
        raise Invalid({field: ["Must be a string."]})
    if required and not value:
        raise Invalid({field: ["This field may not be blank."]})
    if len(value) > max_length:
        raise Invalid({field: [f"At most {max_length} characters."]})
    return value


def clean_aliases(value, field: str = "aliases") -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple):
        raise Invalid({field: ["A list of names."]})
    out = []
    for alias in value:
        if not isinstance(alias, str):
            raise Invalid({field: ["Every alias must be a string."]})
        alias = " ".join(alias.split())
        if len(alias) > 300:
            raise Invalid({field: ["An alias has at most 300 characters."]})
        if alias and alias.lower() not in {a.lower() for a in out}:
            out.append(alias)
    if len(out) > 50:
        raise Invalid({field: ["At most 50 aliases."]})
    return out


def clean_properties(value, field: str = "properties") -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid({field: ["A JSON object."]})
    return value


def clean_sources(value, field: str = "sources", *, required: bool = False) -> list[dict]:
    """A list of {"kind", "ref"}; `"kind:ref"` strings are accepted too (console forms)."""
    if value is None:
        value = []
    if not isinstance(value, list | tuple):
        raise Invalid({field: ["A list of {kind, ref} sources."]})
    out, seen = [], set()
    for item in value:
        if isinstance(item, str):
            kind, _, ref = item.strip().partition(":")
            item = {"kind": kind.strip(), "ref": ref.strip()}
        if not isinstance(item, dict):
            raise Invalid({field: ["Each source is {kind, ref}."]})
        kind, ref = str(item.get("kind", "")).strip(), str(item.get("ref", "")).strip()
        if kind not in MemorySource.KINDS:
            raise Invalid({field: [f"Source kind must be one of {', '.join(MemorySource.KINDS)}."]})
        if not ref or len(ref) > 300:
            raise Invalid({field: ["Each source needs a ref of at most 300 characters."]})
        if (kind, ref) not in seen:
            seen.add((kind, ref))
            out.append({"kind": kind, "ref": ref})
    if required and not out:
        raise Invalid({field: ["At least one evidence source is required."]})
    return out


def clean_type(value) -> str:
    value = clean_text(value, "type", max_length=64, required=False)
    return value.lower()


def clean_blocks(blocks) -> list[dict]:
    if blocks is None:
        return []
    if not isinstance(blocks, list | tuple):
        raise Invalid({"blocks": ["A list of {text, sources}."]})
    if len(blocks) > MAX_BLOCKS_PER_WRITE:
        raise Invalid({"blocks": [f"At most {MAX_BLOCKS_PER_WRITE} blocks at once."]})
    out = []
    for i, block in enumerate(blocks):
        if isinstance(block, str):
            block = {"text": block}
        if not isinstance(block, dict):
            raise Invalid({"blocks": [f"Block {i}: expected {{text, sources}}."]})
        try:
            out.append(
                {
                    "text": clean_text(block.get("text"), "text"),
                    "sources": clean_sources(block.get("sources")),
                }
            )
        except Invalid as exc:
            raise Invalid(
                {"blocks": [f"Block {i}: {field}: {msgs[0]}" for field, msgs in exc.detail.items()]}
            )
    return out


def clean_date(value, field):
    if value in (None, ""):
        return None
    if isinstance(value, datetime.date):
        return value
    try:
        return datetime.date.fromisoformat(str(value))
    except ValueError:
        raise Invalid({field: ["A date as YYYY-MM-DD."]})
