"""The agent file read and checked line by line, before the database is asked anything.

Every field of every line is checked against a table (type, length, range, dates that exist,
the one content limit on a memory's text and value, the skills API's name rule), so no value
can reach the database in a shape it refuses (a 500): a NUL character, a string past its
column, an integer past PostgreSQL's, a date like 2024-02-30, JSON nested past MAX_JSON_DEPTH.
Unknown fields are refused as the API's strict serializers refuse them. Errors name the line
and the field (`line 7: memory text: …`); the whole file is read before any is reported."""

import datetime
import json
import re
from collections.abc import Callable, Iterable

from django.utils.dateparse import parse_date, parse_datetime

from knowledge.errors import Invalid
from knowledge.limits import MAX_JSON_DEPTH, json_scan, json_size_error
from knowledge.memories.rows import memory_content_errors
from knowledge.models import Memory, MemorySource, Skill

# Format 2 names a memory or entry source that is a row of the file by that row's ref too
# (`file_ref`), so an import cites the row it brings in; format 1 gave only the exporting
# Brain's id (read still, but such a source is refused: it may be a row of the file).
FORMAT, VERSION = "brain-agent-export", 2
READS = (1, 2)
ROW_KINDS = ("memory", "entry")  # the source kinds that may be a row of the file
MAX_ERRORS = 50
AGENT_NAME = re.compile(r"[-a-zA-Z0-9_]{1,64}")  # Agent.name, a SlugField
MAX_TEXT = 100_000  # memo, instructions, summaries, reasons: far past any real one
MAX_VERSIONS = 10_000  # a memory's history; the export of a real one is far shorter
MAX_SOURCES = 100
MAX_ITEMS = 200  # aliases, domain types
MAX_INT = 2**31 - 1  # PostgreSQL integer
# A line nests its own fields a few levels above the JSON values it carries (each checked
# against MAX_JSON_DEPTH itself); anything deeper is refused before it is walked again.
MAX_LINE_DEPTH = MAX_JSON_DEPTH + 4

MEMORY_FIELDS = (
    "store", "text", "key", "value", "tier", "category", "confidence", "status", "queue_reason",
    "status_reason", "stale", "stale_reason", "pinned", "valid_from", "valid_to", "expires_at",
    "author_kind", "author_name", "run_id", "turn", "event_id", "created_at",
)  # fmt: skip
DATETIMES = ("valid_from", "valid_to", "expires_at", "created_at")
ENTRY_FIELDS = ("name", "type", "aliases", "summary", "properties", "store", "author_kind", "author_name")
GUIDE_FIELDS = ("domain_types", "taxonomy", "page_thresholds", "update_rules")
VERSION_FIELDS = ("version", "text", "key", "value", "author_kind", "author_name", "reason")
SOURCE_FIELDS = ("kind", "ref", "fingerprint", "snapshot", "state")
RELATION_FIELDS = ("predicate", "sources", "valid_from", "valid_to", "author_kind", "author_name")


# --- one field's check: a function of the value (never None) returning a message or None ------


def _text(max_length: int, *, blank: bool = True) -> Callable:
    def check(value):
        if not isinstance(value, str):
            return "must be a string"
        if not blank and not value.strip():
            return "may not be blank"
        if len(value) > max_length:
            return f"is {len(value):,} characters; at most {max_length:,}"
        return None

    return check


def _int(low: int, high: int) -> Callable:
    def check(value):
        if not isinstance(value, int) or isinstance(value, bool):
            return "must be a whole number"
        return None if low <= value <= high else f"must be from {low} to {high:,}"

    return check


def _bool(value):
    return None if isinstance(value, bool) else "must be true or false"


def _number(value):
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        return "must be a number from 0 to 1"
    return None


def _choice(choices) -> Callable:
    def check(value):
        return None if isinstance(value, str) and value in choices else f"must be one of {', '.join(choices)}"

    return check


def _json(value):
    problem = json_size_error(value)
    return problem[0].lower() + problem[1:].rstrip(".") if problem else None


def _object(value):
    return _json(value) if isinstance(value, dict) else "must be an object"


def _strings(max_length: int) -> Callable:
    def check(value):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be a list of strings"
        if len(value) > MAX_ITEMS:
            return f"holds {len(value):,} items; at most {MAX_ITEMS}"
        if any(len(v) > max_length for v in value):
            return f"an item is longer than {max_length} characters"
        return None

    return check


def _when(parse: Callable, what: str) -> Callable:
    def check(value):
        if not isinstance(value, str):
            return f"must be a {what} as text"
        try:
            parsed = parse(value)
        except ValueError:  # well formed, but no such day or time (2024-02-30)
            return f"{value!r} is not a {what} that exists"
        return None if parsed is not None else f"{value!r} is not a {what}"

    return check


_datetime = _when(parse_datetime, "date and time")
_date = _when(parse_date, "date")
_ref = _text(64, blank=False)
_name = _text(150)


def _skill_name(value):
    if not isinstance(value, str) or not Skill.NAME_RULE.fullmatch(value):
        return "is not a skill name (lower-case letters, digits, - and _; at most 64)"
    return None


def _agent_name(value):
    ok = isinstance(value, str) and AGENT_NAME.fullmatch(value)
    return None if ok else "is not an agent name (letters, digits, - and _; at most 64)"


AUTHOR = {"author_kind": _text(16), "author_name": _name}
# Per line type: every field it may hold, and (in REQUIRED) those it must.
FIELDS = {
    FORMAT: {"version": _int(0, MAX_INT), "agent": _text(64)},
    "agent": {"name": _agent_name, "trusted": _bool, "instructions": _text(MAX_TEXT)},
    "guide": {
        "domain_types": _strings(64),
        "taxonomy": _text(MAX_TEXT),
        "page_thresholds": _object,
        "update_rules": _text(MAX_TEXT),
    },
    "memo": {"text": _text(MAX_TEXT)},
    "skill": {
        "name": _skill_name,
        "title": _text(200, blank=False),
        "instructions": _text(50_000),
        "enabled": _bool,
    },
    "entry": {
        "ref": _ref,
        "name": _text(300, blank=False),
        "entry_type": _text(64),
        "aliases": _strings(300),
        "summary": _text(MAX_TEXT),
        "properties": _object,
        "store": _text(120),
        **AUTHOR,
    },
    "memory": {
        "ref": _ref,
        "version": _int(1, MAX_VERSIONS),
        "store": _text(120),
        "text": _text(MAX_TEXT, blank=False),  # memory_content_errors holds it to the one limit
        "key": _text(200),
        "value": lambda value: None,  # memory_content_errors
        "tier": _choice([t for t, _ in Memory.TIERS]),
        "category": _text(40),
        "confidence": _number,
        # An erased memory is a tombstone, never content an export carries or an import writes.
        "status": _choice([s for s, _ in Memory.STATUSES if s != Memory.ERASED]),
        "queue_reason": _text(16),
        "status_reason": _text(MAX_TEXT),
        "stale": _bool,
        "stale_reason": _text(MAX_TEXT),
        "pinned": _bool,
        **dict.fromkeys(DATETIMES, _datetime),
        **AUTHOR,
        "run_id": _text(100),
        "turn": _int(-MAX_INT, MAX_INT),
        "event_id": _text(100),
        "entry": _ref,
        "position": _int(0, MAX_INT),
        "skill": _skill_name,
        "supersedes": _ref,
        "superseded_by": _ref,
        "versions": lambda value: None if isinstance(value, list) else "must be a list",
        "sources": lambda value: None if isinstance(value, list) else "must be a list",
    },
    "relation": {
        "source": _ref,
        "target": _ref,
        "predicate": _text(100, blank=False),
        "sources": lambda value: (
            _json(value) if isinstance(value, list) and value else "must be a list of sources"
        ),
        "valid_from": _date,
        "valid_to": _date,
        **AUTHOR,
    },
}
REQUIRED = {
    FORMAT: ("version",),
    "agent": ("name",),
    "guide": (),
    "memo": ("text",),
    "skill": ("name", "title"),
    "entry": ("ref", "name", "store"),
    "memory": ("ref", "text", "store", "status", "tier", "version", "versions"),
    "relation": ("source", "target", "predicate", "sources"),
}
VERSION_CHECKS = {"version": _int(1, MAX_VERSIONS), "text": _text(MAX_TEXT, blank=False),
                  "key": _text(200), "value": lambda value: None, **AUTHOR, "reason": _text(MAX_TEXT)}  # fmt: skip
SOURCE_CHECKS = {
    "kind": _choice(MemorySource.KINDS),
    "ref": _text(300, blank=False),
    "fingerprint": _text(64),
    "snapshot": _json,
    "state": _choice([s for s, _ in MemorySource.STATES]),
    "checked_at": _datetime,
    "file_ref": _ref,
}


def _fields(row: dict, checks: dict, required, where: str) -> list[str]:
    """Messages for `row`'s fields against `checks` (None is an absent optional field)."""
    errors = [f"{where} {f}: is required" for f in required if row.get(f) is None]
    for f, value in row.items():
        if f not in checks:
            errors.append(f"{where} {f}: is not a field of this line")
        elif value is not None:
            problem = checks[f](value)
            if problem:
                errors.append(f"{where} {f}: {problem}")
    return errors


def _content(where: str, holder: dict) -> list[str]:
    found = memory_content_errors(
        text=holder.get("text") or "", key=holder.get("key") or "", value=holder.get("value")
    )
    return [
        f"{where} {f}: {m[0].lower() + m[1:].rstrip('.')}" for f, messages in found.items() for m in messages
    ]


def _memory(row: dict) -> list[str]:
    """A memory line's own content, its versions and its sources (the types are checked)."""
    errors = _content("memory", row)
    versions = row["versions"]
    if len(versions) != row["version"]:
        return [*errors, f"memory versions: holds {len(versions)}, the memory is at version {row['version']}"]
    for i, v in enumerate(versions, 1):
        where = f"memory version {i}"
        if not isinstance(v, dict):
            errors.append(f"{where}: must be an object")
            continue
        found = _fields({k: x for k, x in v.items()}, VERSION_CHECKS, ("version", "text"), where)
        if not found and v["version"] != i:
            found = [f"{where}: versions must run 1..{row['version']}, in order"]
        errors.extend(found or _content(where, v))
    seen = set()
    for i, s in enumerate(row.get("sources") or [], 1):
        where = f"memory source {i}"
        if not isinstance(s, dict):
            errors.append(f"{where}: must be an object")
            continue
        found = _fields(s, SOURCE_CHECKS, ("kind", "ref"), where)
        if not found and (s["kind"], s["ref"]) in seen:
            found = [f"{where}: {s['kind']}:{s['ref']} is cited twice"]
        seen.add((s.get("kind"), s.get("ref")) if not found else None)
        errors.extend(found)
    if len(row.get("sources") or []) > MAX_SOURCES:
        errors.append(f"memory sources: at most {MAX_SOURCES}")
    if row.get("entry") is not None and row.get("skill") is not None:
        errors.append("memory: a memory is an entry's block or a skill's lesson, not both")
    return errors


def _ordered(row: dict, parse: Callable, kind: str) -> list[str]:
    start, end = when(row.get("valid_from"), parse), when(row.get("valid_to"), parse)
    if start and end and end < start:
        return [f"{kind} valid_to: is before valid_from"]
    return []


def _no_constant(name: str):
    """Python's json reads NaN and Infinity; PostgreSQL's jsonb refuses them."""
    raise ValueError(f"{name} is not a JSON value")


def _line(text: str) -> tuple[object, str | None]:
    """(the parsed line, or None with why it cannot be read)."""
    try:
        row = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        return None, f"not JSON ({getattr(exc, 'msg', exc)})"
    except RecursionError:  # nesting too deep for the parser itself
        return None, f"nests deeper than {MAX_LINE_DEPTH} levels"
    if not isinstance(row, dict):
        return None, "each line must be a JSON object"
    depth, nul = json_scan(row)
    if depth > MAX_LINE_DEPTH:
        return None, f"nests deeper than {MAX_LINE_DEPTH} levels"
    if nul:
        return None, "holds a NUL character, which cannot be stored"
    return row, None


def parse_export(lines: Iterable[str | bytes]) -> dict:
    """The file's rows grouped by type (each row with `_line`, its line number), after checking
    every line; an Invalid naming each bad line and field (up to MAX_ERRORS) otherwise. Nothing
    is looked up in the database here."""
    errors: list[str] = []
    rows: dict[str, list] = {k: [] for k in REQUIRED if k != FORMAT}
    header = None
    for n, raw in enumerate(lines, 1):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        row, problem = _line(text)
        if problem:
            errors.append(f"line {n}: {problem}")
            if header is None:
                break
            continue
        kind = row.get("type")
        if header is None:
            if kind != FORMAT:
                errors.append(f'line {n}: the first line must be the header {{"type": "{FORMAT}", ...}}')
                break
            header = row
            found = _fields(
                {k: v for k, v in row.items() if k != "type"}, FIELDS[FORMAT], REQUIRED[FORMAT], "header"
            )
            if not found and row["version"] not in READS:
                found = [f"header version: {row['version']} is not {VERSION} (or 1)"]
            errors.extend(f"line {n}: {e}" for e in found)
            continue
        if not isinstance(kind, str) or kind not in rows:
            errors.append(f"line {n}: unknown type {kind!r}")
            continue
        body = {k: v for k, v in row.items() if k != "type"}
        found = _fields(body, FIELDS[kind], REQUIRED[kind], kind)
        if not found and kind == "memory":
            found = _memory(body) + _ordered(body, parse_datetime, kind)
        if not found and kind == "relation":
            found = _ordered(body, parse_date, kind)
        errors.extend(f"line {n}: {e}" for e in found)
        if not found:
            rows[kind].append({**body, "_line": n})
    if header is None and not errors:
        errors.append("line 1: the file is empty")
    if header is not None:
        errors.extend(_references(rows, header["version"]))
    if errors:
        more = [f"(and {len(errors) - MAX_ERRORS} more)"] if len(errors) > MAX_ERRORS else []
        raise Invalid({"file": errors[:MAX_ERRORS] + more})
    return {"header": header, **rows}


def _references(rows: dict, version: int = VERSION) -> list[str]:
    """What the lines say about each other: one agent, refs given once, every ref in the file."""
    errors = []
    if len(rows["agent"]) != 1:
        errors.append("line 1: the file must hold exactly one agent line")
    for kind in ("guide", "memo"):
        errors.extend(f"line {row['_line']}: a second {kind} line" for row in rows[kind][1:])
    for kind, field in (("entry", "ref"), ("memory", "ref"), ("skill", "name")):
        seen = set()
        for row in rows[kind]:
            if row[field] in seen:
                errors.append(f"line {row['_line']}: {kind} {field} {row[field]} appears twice")
            seen.add(row[field])
    entries = {row["ref"]: row for row in rows["entry"]}
    memories = {row["ref"] for row in rows["memory"]}
    skills = {row["name"] for row in rows["skill"]}
    for row in rows["memory"]:
        n, entry = row["_line"], row.get("entry")
        if entry is not None and entry not in entries:
            errors.append(f"line {n}: memory entry: {entry} is not in the file")
        elif entry is not None and entries[entry]["store"] != row["store"]:
            errors.append(
                f"line {n}: memory store: a block is in its entry's store ({entries[entry]['store']})"
            )
        if row.get("skill") is not None and row["skill"] not in skills:
            errors.append(f"line {n}: memory skill: {row['skill']} is not in the file")
        elif row.get("skill") is not None and row["store"] != "self":
            errors.append(f"line {n}: memory store: a skill's lesson is in the agent's self store")
        for f in ("supersedes", "superseded_by"):
            if row.get(f) is not None and row[f] not in memories:
                errors.append(f"line {n}: memory {f}: {row[f]} is not in the file")
    for row in rows["relation"]:
        if row["source"] not in entries or row["target"] not in entries:
            errors.append(f"line {row['_line']}: relation: its entries must be in the file")
    refs = {"memory": memories, "entry": set(entries)}
    for kind in ("memory", "relation"):
        for row in rows[kind]:
            for i, s in enumerate(row.get("sources") or [], 1):
                problem = _row_source(s, refs, version)
                if problem:
                    errors.append(f"line {row['_line']}: {kind} source {i}: {problem}")
    return errors


def _row_source(source, refs: dict, version: int) -> str | None:
    """What is wrong with a source that names a row of the file (or may), or None: its
    `file_ref` must be a row of that kind in the file; a format-1 file cannot say whether a
    memory or entry id is one of its own rows, whose id changes on import."""
    if not isinstance(source, dict):
        return None  # a relation's sources are checked as JSON only; the entry service reads them
    kind, file_ref = source.get("kind"), source.get("file_ref")
    if file_ref is not None:
        if kind not in ROW_KINDS:
            return f"file_ref: a {kind} source is no row of the file"
        if not isinstance(file_ref, str) or file_ref not in refs[kind]:
            return f"file_ref: {file_ref} is not a {kind} of the file"
    elif version == 1 and kind in ROW_KINDS:
        return (
            f"{kind}:{source.get('ref')} is an id in the Brain that exported this format-1 file, "
            "which does not say whether it is one of the file's own rows; export the agent again"
        )
    return None


def when(value: str | None, parse: Callable = parse_datetime):
    """A checked date-time (UTC when the file gave none) or date from the file, or None."""
    if not value:
        return None
    parsed = parse(value)
    if isinstance(parsed, datetime.datetime) and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed
