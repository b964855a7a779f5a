"""What a stored original is (sniffed from its bytes, never its name) and its text, cut into
sections. Each file type is read by a library: PDF by pypdf, DOCX by python-docx, HTML by nh3
(sanitised to headings and paragraphs, then flattened); plain text and Markdown are decoded as
UTF-8. The name only tells Markdown from plain text once the bytes are known to be text."""

import html
import io
import re
from dataclasses import dataclass, field

import filetype

PLAIN, MARKDOWN, HTML = "text/plain", "text/markdown", "text/html"
PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
LEARNED_TYPES = (PLAIN, MARKDOWN, HTML, PDF, DOCX)
SECTION_CHARS = 4000  # a longer section is cut at paragraph boundaries
_HTML_START = re.compile(rb"^\s*(<!doctype html|<html|<head|<body|<h[1-6][\s>]|<p[\s>]|<div[\s>])", re.I)


class Refused(ValueError):
    """The bytes are not a type Brain learns; the text says what they are."""


class Unreadable(ValueError):
    """A file of a learned type whose text could not be read (corrupt, encrypted)."""


@dataclass
class Section:
    title: str
    text: str
    page: int | None = None  # the PDF page it starts on


@dataclass
class Extracted:
    sections: list[Section] = field(default_factory=list)
    pages: int = 0

    @property
    def text(self) -> str:
        return "\n\n".join(s.text for s in self.sections)


def sniff(data: bytes, filename: str = "") -> str:
    """The media type of `data`, from its bytes; raises Refused for anything not learned."""
    if not data:
        raise Refused("The file is empty.")
    kind = filetype.guess(data)
    if kind is not None:
        if kind.mime == PDF:
            return PDF
        if kind.mime == DOCX:
            return DOCX
        raise Refused(
            f"The file's bytes are {kind.mime} (.{kind.extension}), which is not learned; "
            "send plain text, Markdown, HTML, PDF or DOCX."
        )
    if b"\x00" in data[:65536]:
        raise Refused("The file's bytes are binary, not text; send plain text, Markdown, HTML, PDF or DOCX.")
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Refused("The file is neither a known document type nor UTF-8 text.") from None
    if _HTML_START.match(data[:2048].lstrip(b"\xef\xbb\xbf")):
        return HTML
    if filename.lower().endswith((".md", ".markdown")):
        return MARKDOWN
    return PLAIN


def extract(media_type: str, data: bytes) -> Extracted:
    """The text of an original of `media_type`, cut into sections; raises Unreadable."""
    if media_type == PDF:
        return _pdf(data)
    if media_type == DOCX:
        return _docx(data)
    text = data.decode("utf-8-sig")
    if media_type == HTML:
        return Extracted(sections=_cut(html_to_text(text)))
    return Extracted(sections=_cut(text.replace("\r\n", "\n")))


def _pdf(data: bytes) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise Unreadable("The PDF is encrypted; its text cannot be read.")
        sections = []
        for number, page in enumerate(reader.pages, 1):
            text = " ".join((page.extract_text() or "").split(" "))
            text = "\n".join(line.strip() for line in text.splitlines() if line.strip())
            if text:
                for i, part in enumerate(_split_long(text)):
                    title = f"Page {number}" + (f" ({i + 1})" if i else "")
                    sections.append(Section(title=title, text=part, page=number))
        return Extracted(sections=sections, pages=len(reader.pages))
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, Unreadable):
            raise
        raise Unreadable(f"The PDF could not be read: {exc}") from None


def _docx(data: bytes) -> Extracted:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, KeyError, ValueError) as exc:
        raise Unreadable(f"The DOCX could not be read: {exc}") from None
    lines = []
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = (paragraph.style.name if paragraph.style is not None else "") or ""
        if style.lower().startswith(("heading", "title")):
            level = int(style[-1]) if style[-1:].isdigit() else 1
            lines.append("#" * min(level, 6) + " " + text)
        else:
            lines.append(text)
        lines.append("")
    return Extracted(sections=_cut("\n".join(lines)))


def html_to_text(markup: str) -> str:
    """Web content as text with Markdown headings: nh3 keeps headings, paragraphs, list items and
    line breaks (script and style are dropped with their content); the rest is flattened."""
    import nh3

    keep = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "br", "div", "tr"}
    clean = nh3.clean(markup, tags=keep, attributes={}, strip_comments=True)
    clean = re.sub(r"<h([1-6])>", lambda m: "\n\n" + "#" * int(m.group(1)) + " ", clean)
    clean = re.sub(r"</h[1-6]>", "\n\n", clean)
    clean = re.sub(r"<li>", "\n- ", clean)
    clean = re.sub(r"<br\s*/?>|</?(p|div|tr|li)>", "\n", clean)
    clean = re.sub(r"<[^>]+>", "", clean)
    text = html.unescape(clean)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.strip() for line in text.splitlines())).strip()


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def _cut(text: str) -> list[Section]:
    """Sections at Markdown headings (`#`…`######`); text before the first heading is its own
    section; a section longer than SECTION_CHARS is cut at paragraph boundaries."""
    sections: list[Section] = []
    title, lines = "", []

    def flush():
        body = "\n".join(lines).strip()
        if body:
            for i, part in enumerate(_split_long(body)):
                sections.append(
                    Section(title=(title or "Introduction") + (f" ({i + 1})" if i else ""), text=part)
                )

    for line in text.splitlines():
        match = _HEADING.match(line.strip())
        if match:
            flush()
            title, lines = match.group(2).strip(), []
        else:
            lines.append(line)
    flush()
    if not sections and title:
        sections.append(Section(title=title, text=title))
    return sections


def _split_long(text: str) -> list[str]:
    if len(text) <= SECTION_CHARS:
        return [text]
    parts, current = [], ""
    for paragraph in re.split(r"\n\s*\n|\n", text):
        while len(paragraph) > SECTION_CHARS:
            if current:
                parts.append(current.strip())
                current = ""
            parts.append(paragraph[:SECTION_CHARS])
            paragraph = paragraph[SECTION_CHARS:]
        if current and len(current) + len(paragraph) + 2 > SECTION_CHARS:
            parts.append(current.strip())
            current = ""
        current += paragraph + "\n\n"
    if current.strip():
        parts.append(current.strip())
    return parts
