"""An entry's projection: the Markdown an agent reads for it (metadata, summary, properties,
active body blocks with their cited sources, relations with their evidence), and its safe HTML
rendering for the console (Markdown, then sanitised by nh3: no scripts, no `javascript:`)."""

import json

import markdown
import nh3
from django.urls import NoReverseMatch, reverse

from knowledge.models import Entry, Memory

ALLOWED_TAGS = {
    "a",
    "p",
    "br",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "ul",
    "ol",
    "li",
    "strong",
    "em",
    "code",
    "pre",
    "blockquote",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "del",
    "sup",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}
URL_SCHEMES = {"http", "https", "mailto"}

# Console pages that show a cited source of a kind, if the app that owns it is installed.
SOURCE_ROUTES = {
    "memory": "memory-detail",
    "material": "material-detail",
    "conversation": "conversation-detail",
}


def source_url(kind: str, ref: str) -> str | None:
    """Where a cited source can be opened, or None when Brain has no page for it."""
    if ref.startswith(("https://", "http://")):
        return ref
    if kind == "entry" and ref.isdigit():
        return reverse("entry-edit", args=[int(ref)])
    route = SOURCE_ROUTES.get(kind)
    if route and ref.isdigit():
        try:
            return reverse(route, args=[int(ref)])
        except NoReverseMatch:
            return None
    return None


def _md_text(value: str) -> str:
    """Text placed inside Markdown syntax we generate (link labels, list items): one line, with
    the characters that would end or start a construct escaped."""
    value = " ".join(str(value).split())
    for ch in "\\`*_[]<>#|":
        value = value.replace(ch, "\\" + ch)
    return value


def _source(kind: str, ref: str, *, links: bool) -> str:
    label = _md_text(f"{kind}:{ref}")
    url = source_url(kind, ref) if links else None
    return f"[{label}](<{url}>)" if url else label


def entry_markdown(entry: Entry, blocks, outgoing=(), incoming=(), *, links: bool = True) -> str:
    """The Markdown the agent reads for this entry. Only active blocks are part of it."""
    lines = [f"# {_md_text(entry.name)}", ""]
    meta = []
    if entry.type:
        meta.append(f"*Type:* {_md_text(entry.type)}")
    if entry.aliases:
        meta.append("*Also known as:* " + ", ".join(_md_text(a) for a in entry.aliases))
    if meta:
        lines += [" · ".join(meta), ""]
    if entry.summary:
        lines += [entry.summary, ""]
    if entry.properties:
        lines += ["## Properties", ""]
        for key, value in entry.properties.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"- **{_md_text(key)}**: {_md_text(shown)}")
        lines.append("")
    active = [b for b in blocks if b.status == Memory.ACTIVE]
    if active:
        lines += ["## Notes", ""]
        for block in active:
            lines += [block.text.strip(), ""]
            sources = list(block.sources.all())
            if sources:
                cited = ", ".join(_source(s.kind, s.ref, links=links) for s in sources)
                lines += [f"*Sources:* {cited}", ""]
    if outgoing or incoming:
        lines += ["## Relations", ""]
        for rel in outgoing:
            lines.append(_relation_line(rel.predicate, rel.target, rel, links=links))
        for rel in incoming:
            lines.append(_relation_line(f"{rel.predicate} (of)", rel.source, rel, links=links, inverse=True))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _relation_line(predicate, other, rel, *, links, inverse=False) -> str:
    name = _md_text(other.name)
    other_ref = (
        f"[{name}](<{reverse('entry-edit', args=[other.pk])}>)" if links else f"{name} (entry {other.pk})"
    )
    when = []
    if rel.valid_from:
        when.append(f"since {rel.valid_from.isoformat()}")
    if rel.valid_to:
        when.append(f"until {rel.valid_to.isoformat()}")
    evidence = ", ".join(_source(s["kind"], s["ref"], links=links) for s in rel.sources)
    text = f"- {_md_text(predicate)} → {other_ref}"
    if inverse:
        text = f"- {other_ref} {_md_text(rel.predicate)} this"
    if when:
        text += f" ({', '.join(when)})"
    return text + f" — evidence: {evidence}"


def render_markdown(text: str) -> str:
    """Markdown to HTML that is safe to put in a page: raw HTML and unsafe links are removed."""
    html = markdown.markdown(text, extensions=["tables", "fenced_code", "sane_lists"])
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
    )
