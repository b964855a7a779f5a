"""What a stored original is (sniffed from its bytes, never its name) and its text, cut into
sections. Each file type is read by a library: PDF by pypdf, DOCX by python-docx, HTML by nh3
(parsed and cut down to its main content's blocks, `html_read`); plain text and Markdown are decoded as
UTF-8. The name only tells Markdown from plain text once the bytes are known to be text.

Bounded (Limits): at most `pages` PDF pages, `sections` sections and `chars` characters are
read — past them the text is cut and `Extracted.truncated` says what was left out — and a DOCX
(a ZIP) is refused before it is opened when its entries would unpack past `unzipped_bytes` or
one of them is compressed more than `zip_ratio` to one (a zip or media bomb), since python-docx
unpacks every part, images included, into memory. `extract_bounded` runs the whole extraction
in a child process under a memory and CPU ceiling (the learning job's), so a file that gets past
these checks still cannot take the worker with it. Nothing here imports Django: the child
process runs this module alone."""

import io
import json
import re
import resource
import signal
import subprocess
import sys
import zipfile
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser

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
    """A file of a learned type whose text could not be read (corrupt, encrypted, a
    decompression bomb, past the memory or time ceiling)."""


@dataclass(frozen=True)
class Limits:
    pages: int = 300
    sections: int = 200
    chars: int = 500_000
    unzipped_bytes: int = 50 * 1024 * 1024
    zip_ratio: int = 100
    zip_entries: int = 5000


@dataclass
class Section:
    title: str
    text: str
    page: int | None = None  # the PDF page it starts on


@dataclass
class Extracted:
    sections: list[Section] = field(default_factory=list)
    pages: int = 0
    truncated: list[str] = field(default_factory=list)  # what the limits left out, in words
    title: str = ""  # the title the document gives itself (an HTML page's), if any

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


def extract(media_type: str, data: bytes, limits: Limits = Limits()) -> Extracted:
    """The text of an original of `media_type`, cut into sections, within `limits`; raises
    Unreadable."""
    if media_type == PDF:
        extracted = _pdf(data, limits)
    elif media_type == DOCX:
        extracted = _docx(data, limits)
    else:
        text = data.decode("utf-8-sig")
        extracted = Extracted()
        if media_type == HTML:
            page = html_read(text)
            text, extracted.title = page.text, page.title
        text = _keep_chars(text.replace("\r\n", "\n"), limits, extracted)
        extracted.sections = _cut(text)
    return _keep_sections(extracted, limits)


def _keep_chars(text: str, limits: Limits, extracted: Extracted) -> str:
    if len(text) > limits.chars:
        extracted.truncated.append(
            f"only the first {limits.chars:,} of {len(text):,} characters were read (BRAIN_MATERIAL_MAX_CHARS)"
        )
        return text[: limits.chars]
    return text


def _keep_sections(extracted: Extracted, limits: Limits) -> Extracted:
    if len(extracted.sections) > limits.sections:
        extracted.truncated.append(
            f"only the first {limits.sections:,} of {len(extracted.sections):,} sections were learned "
            "(BRAIN_MATERIAL_MAX_SECTIONS)"
        )
        extracted.sections = extracted.sections[: limits.sections]
    return extracted


def _pdf(data: bytes, limits: Limits) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise Unreadable("The PDF is encrypted; its text cannot be read.")
        extracted = Extracted(pages=len(reader.pages))
        chars = 0
        for number, page in enumerate(reader.pages, 1):
            if number > limits.pages:
                extracted.truncated.append(
                    f"only the first {limits.pages:,} of {extracted.pages:,} pages were read (BRAIN_MATERIAL_MAX_PAGES)"
                )
                break
            if chars >= limits.chars or len(extracted.sections) >= limits.sections:
                extracted.truncated.append(
                    f"reading stopped at page {number} of {extracted.pages:,}: the character or section "
                    "limit was reached (BRAIN_MATERIAL_MAX_CHARS, BRAIN_MATERIAL_MAX_SECTIONS)"
                )
                break
            text = " ".join((page.extract_text() or "").split(" "))
            text = "\n".join(line.strip() for line in text.splitlines() if line.strip())[
                : limits.chars - chars
            ]
            chars += len(text)
            if text:
                for i, part in enumerate(_split_long(text)):
                    title = f"Page {number}" + (f" ({i + 1})" if i else "")
                    extracted.sections.append(Section(title=title, text=part, page=number))
        return extracted
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, Unreadable):
            raise
        raise Unreadable(f"The PDF could not be read: {exc}") from None


def zip_check(data: bytes, limits: Limits) -> None:
    """Refuse a ZIP (a DOCX) whose entries would unpack past the limits, before anything is
    unpacked. The sizes come from the archive's directory; zipfile never hands out more than an
    entry's recorded size (a lie there fails its CRC check), so they bound what is read."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise Unreadable(f"The DOCX could not be read: {exc}") from None
    if len(entries) > limits.zip_entries:
        raise Unreadable(f"The DOCX holds {len(entries):,} files (at most {limits.zip_entries:,} are read).")
    total = sum(e.file_size for e in entries)
    if total > limits.unzipped_bytes:
        raise Unreadable(
            f"The DOCX would unpack to {total / 1048576:,.0f} MB (at most {limits.unzipped_bytes / 1048576:,.0f} MB); "
            "refused as a possible decompression bomb."
        )
    for e in entries:
        if e.file_size > 1024 * 1024 and e.file_size > limits.zip_ratio * max(e.compress_size, 1):
            raise Unreadable(
                f"{e.filename} in the DOCX is compressed {e.file_size // max(e.compress_size, 1):,} to one "
                f"(at most {limits.zip_ratio} to one); refused as a possible decompression bomb."
            )


def _docx(data: bytes, limits: Limits) -> Extracted:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    zip_check(data, limits)
    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise Unreadable(f"The DOCX could not be read: {exc}") from None
    extracted = Extracted()
    lines, chars = [], 0
    for paragraph in document.paragraphs:
        if chars > limits.chars:
            extracted.truncated.append(
                f"only about the first {limits.chars:,} characters were read (BRAIN_MATERIAL_MAX_CHARS)"
            )
            break
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
        chars += len(text)
    extracted.sections = _cut("\n".join(lines))
    return extracted


# What a page wraps around its content: dropped with everything inside. A page's own <header>
# is dropped too, but not an article's or a section's (it holds their heading).
_HTML_CHROME = {"script", "style", "noscript", "template", "nav", "aside", "footer", "select", "iframe"}
_HTML_BLOCKS = {
    "p", "div", "main", "article", "section", "header", "ul", "ol", "table", "blockquote",
    "pre", "figure", "figcaption", "dl", "dt", "dd", "address", "details", "summary", "hr", "form",
}  # fmt: skip
_HTML_KEPT = _HTML_BLOCKS | {"title", "h1", "h2", "h3", "h4", "h5", "h6", "li", "br", "tr", "td", "th"}
_HTML_VOID = {"br", "hr"}


class _PageReader(HTMLParser):
    """Walks markup nh3 has already parsed and re-serialised (html5ever: every element closed,
    only _HTML_KEPT left), so a plain tokenizer sees a well-formed tree."""

    def __init__(self, main_only: bool):
        super().__init__(convert_charrefs=True)
        self.main_only = main_only
        self.out: list[str] = []
        self.stack: list[str] = []
        self.skip = 0  # depth inside something dropped
        self.title = ""
        self.h1 = ""
        self.capture: str | None = None  # "title" / "h1" while reading the first of each
        self.cells = 0

    def _inside(self, *names: str) -> bool:
        return any(name in self.stack for name in names)

    def _shown(self) -> bool:
        return not self.skip and (not self.main_only or self._inside("main"))

    def handle_starttag(self, tag, attrs):
        if tag in _HTML_VOID:
            if tag == "br" and self._shown():
                self.out.append("\n")
            elif self._shown():
                self.out.append("\n\n")
            return
        page_header = tag == "header" and not self._inside("article", "section", "main")
        self.stack.append(tag)
        if self.skip or tag == "title" or page_header:
            self.skip += 1
        if tag == "title" and not self.title:
            self.capture = "title"
        elif tag == "h1" and not self.h1:
            self.capture = "h1"
        if not self._shown():
            return
        if tag[0] == "h" and tag[1:].isdigit():
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag == "tr":
            self.out.append("\n")
            self.cells = 0
        elif tag in ("td", "th"):
            self.out.append(" | " if self.cells else "")
            self.cells += 1
        elif tag in _HTML_BLOCKS:
            self.out.append("\n\n")

    def handle_endtag(self, tag):
        if tag not in self.stack:
            return
        shown = self._shown()
        while self.stack and self.stack.pop() != tag:
            pass
        if tag == self.capture:
            self.capture = None
        if self.skip:
            self.skip -= 1
        if shown and (tag in _HTML_BLOCKS or (tag[0] == "h" and tag[1:].isdigit())):
            self.out.append("\n\n")

    def handle_data(self, data):
        if self.capture == "title":
            self.title += data
        elif self.capture == "h1":
            self.h1 += data
        if self._shown():
            self.out.append(data if self._inside("pre") else re.sub(r"\s+", " ", data))


@dataclass
class Page:
    title: str  # the page's <title>, else its first <h1>; "" when it has neither
    text: str  # the main content as text with Markdown headings, one block per paragraph


def html_read(markup: str) -> Page:
    """Web content as a person reads it: its main content only (inside <main> when the page has
    one; never navigation, a page header, footer, aside, script or style), with a blank line
    between blocks and Markdown headings, so a section starts at each heading. nh3 parses it
    (the same html5ever parser it sanitises with)."""
    import nh3

    clean = nh3.clean(
        markup, tags=_HTML_KEPT, attributes={}, strip_comments=True, clean_content_tags=_HTML_CHROME
    )
    reader = _PageReader(main_only="<main>" in clean)
    reader.feed(clean)
    reader.close()
    lines = [line.strip() for line in "".join(reader.out).splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join((reader.title or reader.h1).split())
    return Page(title=title, text=text)


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


# --- in a child process, under a ceiling -----------------------------------------------------


def extract_bounded(
    media_type: str, data: bytes, limits: Limits = Limits(), *, memory_mb: int = 1024, seconds: int = 300
) -> Extracted:
    """extract() in a child process whose address space is held to `memory_mb` and its CPU time
    to `seconds` (resource.setrlimit), with a wall-clock deadline beside: a file that would need
    more fails with that reason instead of growing or holding the worker. memory_mb=0: in this
    process (no ceiling)."""
    if not memory_mb:
        return extract(media_type, data, limits)

    def ceiling():
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 1024 * 1024,) * 2)
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))

    try:
        child = subprocess.run(
            [sys.executable, "-m", "knowledge.materials.extract", media_type, json.dumps(asdict(limits))],
            input=data,
            capture_output=True,
            timeout=seconds * 2,
            preexec_fn=ceiling,  # noqa: PLW1509  (the learning job's process runs no other threads' forks)
            cwd=_ROOT,
        )
    except subprocess.TimeoutExpired:
        raise Unreadable(f"Reading the file took longer than {seconds * 2} s; it was stopped.") from None
    try:
        answer = json.loads(child.stdout)
    except ValueError:
        answer = None
    if child.returncode != 0 or not isinstance(answer, dict):
        tail = child.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        if "MemoryError" in tail[0] or child.returncode in (-9, -6):
            raise Unreadable(f"Reading the file needed more than {memory_mb} MB of memory; it was stopped.")
        if child.returncode == -signal.SIGXCPU:
            raise Unreadable(f"Reading the file needed more than {seconds} s of CPU time; it was stopped.")
        raise Unreadable(f"Reading the file failed: {tail[0][:300] or f'exit status {child.returncode}'}")
    if "unreadable" in answer:
        raise Unreadable(answer["unreadable"])
    return Extracted(
        sections=[Section(**s) for s in answer["sections"]],
        pages=answer["pages"],
        truncated=answer["truncated"],
        title=answer["title"],
    )


_ROOT = __file__.rsplit("/knowledge/", 1)[0]


def _child_main() -> int:
    media_type, limits = sys.argv[1], Limits(**json.loads(sys.argv[2]))
    data = sys.stdin.buffer.read()
    try:
        extracted = extract(media_type, data, limits)
    except Unreadable as exc:
        answer = {"unreadable": str(exc)}
    else:
        answer = asdict(extracted)
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
