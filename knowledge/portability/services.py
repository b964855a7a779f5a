"""One agent's knowledge as one versioned JSON Lines file, out and back in: the agent, its
curation guide and pinned memo, its skills' overlays, its entries with their blocks and
relations, and its memories with their versions, sources (fingerprints included) and validity.

The file names rows by export-local refs ("e1", "m7"), never by database ids, so an export of an
import reads the same as the file imported. An import is an admin's restore of knowledge as it
was: rows come back in the state they were exported in (no review queue, no gate), in one
transaction with one `agent.imported` audit event. It validates the whole file before writing
anything (every bad line is named), and matches what is already there (an entry by owner, name
and store; a memory by owner, store, attachment, content hash and version; a relation by its
ends and predicate), so importing a file twice changes nothing."""

import json
import re
from collections.abc import Iterable

from django.db import transaction
from django.utils.dateparse import parse_date, parse_datetime

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.errors import Invalid
from knowledge.memories.exported import memory_row_exported
from knowledge.memories.rows import memory_row_state
from knowledge.models import (
    Agent,
    AgentSkill,
    CurationGuide,
    Entry,
    EntryRelation,
    Memory,
    MemorySource,
    PinnedMemo,
    Skill,
)
from knowledge.principal import ADMIN, Principal

FORMAT, VERSION = "brain-agent-export", 1
MAX_ERRORS = 50
SLUG = re.compile(r"[-a-zA-Z0-9_]{1,64}")

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


def _iso(value):
    return value.isoformat() if value is not None else None


# --- export ---------------------------------------------------------------------------------


def agent_export(*, actor: Principal, agent: Agent) -> Iterable[str]:
    """The agent's knowledge as JSON Lines (one JSON object per line, header first). Audited as
    `agent.exported`."""
    with transaction.atomic():
        audit_record(
            "agent.exported", actor=actor, owner=agent.name, object_type="agent", object_ids=[agent.pk]
        )
    return [json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in export_rows(agent)]


def export_rows(agent: Agent) -> list[dict]:
    rows = [
        {"type": FORMAT, "version": VERSION, "agent": agent.name},
        {"type": "agent", "name": agent.name, "trusted": agent.trusted, "instructions": agent.instructions},
    ]
    guide = CurationGuide.objects.filter(owner=agent).first()
    if guide is not None:
        rows.append({"type": "guide", **{f: getattr(guide, f) for f in GUIDE_FIELDS}})
    memo = PinnedMemo.objects.filter(agent=agent).first()
    if memo is not None and memo.text:
        rows.append({"type": "memo", "text": memo.text})
    for link in AgentSkill.objects.filter(agent=agent).select_related("skill").order_by("skill__name"):
        s = link.skill
        rows.append(
            {
                "type": "skill",
                "name": s.name,
                "title": s.title,
                "instructions": s.instructions,
                "enabled": link.enabled,
            }
        )

    entries = list(Entry.objects.filter(owner=agent).order_by("id"))
    entry_ref = {e.pk: f"e{i}" for i, e in enumerate(entries, 1)}
    for e in entries:
        # The entry's own type (person, system, ...) goes as entry_type: "type" names the line.
        fields = {("entry_type" if f == "type" else f): getattr(e, f) for f in ENTRY_FIELDS}
        rows.append({"type": "entry", "ref": entry_ref[e.pk], **fields})

    memories = list(
        Memory.objects.filter(owner=agent)
        .exclude(entry__isnull=False, entry__deleted_at__isnull=False)
        .select_related("skill")
        .prefetch_related("sources", "versions")
        .order_by("id")
    )
    memory_ref = {m.pk: f"m{i}" for i, m in enumerate(memories, 1)}
    for m in memories:
        row = {"type": "memory", "ref": memory_ref[m.pk], "version": m.version}
        for f in MEMORY_FIELDS:
            row[f] = _iso(getattr(m, f)) if f in DATETIMES else getattr(m, f)
        row["entry"] = entry_ref.get(m.entry_id)
        row["position"] = m.position if m.entry_id in entry_ref else None
        row["skill"] = m.skill.name if m.skill_id else None
        row["supersedes"] = memory_ref.get(m.supersedes_id)
        row["superseded_by"] = memory_ref.get(m.superseded_by_id)
        row["versions"] = [
            {f: getattr(v, f) for f in VERSION_FIELDS}
            for v in sorted(m.versions.all(), key=lambda v: v.version)
        ]
        row["sources"] = [
            {**{f: getattr(s, f) for f in SOURCE_FIELDS}, "checked_at": _iso(s.checked_at)}
            for s in sorted(m.sources.all(), key=lambda s: (s.kind, s.ref))
        ]
        rows.append(row)

    relations = EntryRelation.objects.filter(source_id__in=entry_ref, target_id__in=entry_ref).order_by("id")
    for r in relations:
        row = {"type": "relation", "source": entry_ref[r.source_id], "target": entry_ref[r.target_id]}
        for f in RELATION_FIELDS:
            row[f] = _iso(getattr(r, f)) if f in ("valid_from", "valid_to") else getattr(r, f)
        rows.append(row)
    return rows


# --- validation -----------------------------------------------------------------------------


def _check(errors: list, line: int, ok: bool, message: str) -> bool:
    if not ok:
        errors.append(f"line {line}: {message}")
    return ok


REQUIRED = {
    "agent": {"name": str},
    "guide": {},
    "memo": {"text": str},
    "skill": {"name": str, "title": str},
    "entry": {"ref": str, "name": str, "store": str},
    "memory": {
        "ref": str,
        "text": str,
        "store": str,
        "status": str,
        "tier": str,
        "version": int,
        "versions": list,
    },
    "relation": {"source": str, "target": str, "predicate": str},
}
STATUSES = {s for s, _ in Memory.STATUSES}
TIERS = {t for t, _ in Memory.TIERS}


def parse_export(lines: Iterable[str | bytes]) -> dict:
    """The file's rows grouped by type, after checking every line; an Invalid naming each bad
    line (up to MAX_ERRORS) otherwise. Nothing is looked up in the database here."""
    errors: list[str] = []
    rows: dict[str, list] = {k: [] for k in REQUIRED}
    header = None
    for n, raw in enumerate(lines, 1):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except ValueError as exc:
            errors.append(f"line {n}: not JSON ({exc.msg})")
            continue
        if not _check(errors, n, isinstance(row, dict), "each line must be a JSON object"):
            continue
        kind = row.get("type")
        if header is None:
            if _check(
                errors, n, kind == FORMAT, f'the first line must be the header {{"type": "{FORMAT}", ...}}'
            ):
                header = row
                _check(
                    errors,
                    n,
                    row.get("version") == VERSION,
                    f"format version {row.get('version')!r} is not {VERSION}",
                )
            else:
                break
            continue
        if not _check(errors, n, kind in REQUIRED, f"unknown type {kind!r}"):
            continue
        missing = [
            f
            for f, t in REQUIRED[kind].items()
            if not isinstance(row.get(f), t) or isinstance(row.get(f), bool) and t is int
        ]
        if not _check(errors, n, not missing, f"{kind} needs {', '.join(missing)}"):
            continue
        if kind == "memory":
            _check(errors, n, row["status"] in STATUSES, f"unknown status {row['status']!r}")
            _check(errors, n, row["tier"] in TIERS, f"unknown tier {row['tier']!r}")
            versions = [v.get("version") for v in row["versions"] if isinstance(v, dict)]
            _check(
                errors,
                n,
                versions == list(range(1, row["version"] + 1)),
                "versions must run 1..version, in order",
            )
            for f in DATETIMES:
                if row.get(f) is not None:
                    _check(
                        errors,
                        n,
                        isinstance(row[f], str) and parse_datetime(row[f]) is not None,
                        f"{f} is not a date-time",
                    )
            for s in row.get("sources") or []:
                ok = (
                    isinstance(s, dict)
                    and s.get("kind") in MemorySource.KINDS
                    and isinstance(s.get("ref"), str)
                )
                _check(errors, n, ok, f"bad source {s!r}")
            conf = row.get("confidence", 1.0)
            _check(
                errors,
                n,
                isinstance(conf, int | float) and 0 <= conf <= 1,
                "confidence must be between 0 and 1",
            )
        if kind == "relation":
            for f in ("valid_from", "valid_to"):
                if row.get(f) is not None:
                    _check(
                        errors,
                        n,
                        isinstance(row[f], str) and parse_date(row[f]) is not None,
                        f"{f} is not a date",
                    )
        rows[kind].append((n, row))
    if header is None and not errors:
        errors.append("line 1: the file is empty")
    if header is not None:
        _check(errors, 1, len(rows["agent"]) == 1, "the file must hold exactly one agent line")
        for kind, field in (("entry", "ref"), ("memory", "ref")):
            seen = set()
            for n, row in rows[kind]:
                _check(errors, n, row[field] not in seen, f"{kind} ref {row[field]} appears twice")
                seen.add(row[field])
        entries = {row["ref"] for _, row in rows["entry"]}
        memories = {row["ref"] for _, row in rows["memory"]}
        skills = {row["name"] for _, row in rows["skill"]}
        for n, row in rows["memory"]:
            _check(
                errors,
                n,
                row.get("entry") in entries | {None},
                f"entry {row.get('entry')} is not in the file",
            )
            _check(
                errors, n, row.get("skill") in skills | {None}, f"skill {row.get('skill')} is not in the file"
            )
            for f in ("supersedes", "superseded_by"):
                _check(errors, n, row.get(f) in memories | {None}, f"{f} {row.get(f)} is not in the file")
        for n, row in rows["relation"]:
            _check(
                errors,
                n,
                row["source"] in entries and row["target"] in entries,
                "a relation's entries must be in the file",
            )
    if errors:
        more = f" (and {len(errors) - MAX_ERRORS} more)" if len(errors) > MAX_ERRORS else ""
        raise Invalid({"file": errors[:MAX_ERRORS] + ([more.strip()] if more else [])})
    return {"header": header, **{k: [row for _, row in v] for k, v in rows.items()}}


# --- import ---------------------------------------------------------------------------------


def _dt(value):
    return parse_datetime(value) if value else None


def agent_import(*, actor: Principal, lines: Iterable[str | bytes], as_name: str = "") -> dict:
    """Import a file from `agent_export` (into the agent it names, or `as_name`). Returns counts
    of what was written; a second import of the same file writes nothing."""
    from knowledge.principals import services as principals

    access.require_role(actor, ADMIN, "Only admins import knowledge.")
    data = parse_export(lines)
    spec = data["agent"][0]
    name = as_name or spec["name"]
    if not SLUG.fullmatch(name):
        raise Invalid({"as_name": [f"{name!r} is not an agent name (letters, digits, - and _)."]})
    counts = dict.fromkeys(("agent", "guide", "memo", "skills", "entries", "memories", "relations"), 0)
    with transaction.atomic():
        agent = Agent.objects.filter(name=name).first()
        if agent is None:
            agent = principals.agent_create(
                actor=actor,
                name=name,
                trusted=bool(spec.get("trusted")),
                instructions=spec.get("instructions") or "",
            )
            counts["agent"] = 1
        for g in data["guide"]:
            guide, created = CurationGuide.objects.get_or_create(owner=agent)
            changed = {f: g[f] for f in GUIDE_FIELDS if f in g and getattr(guide, f) != g[f]}
            if changed or created:
                for f, v in changed.items():
                    setattr(guide, f, v)
                guide.updated_by = actor.name
                guide.save()
                counts["guide"] = 1
        for m in data["memo"]:
            memo, _ = PinnedMemo.objects.get_or_create(agent=agent)
            if memo.text != m["text"]:
                memo.text, memo.version = m["text"], memo.version + 1
                memo.updated_by_kind, memo.updated_by_name = actor.kind, actor.name
                memo.save()
                counts["memo"] = 1
        skills = {}
        for s in data["skill"]:
            skill, created = Skill.objects.get_or_create(
                name=s["name"],
                defaults={
                    "title": s["title"],
                    "instructions": s.get("instructions") or "",
                    "updated_by": actor.name,
                },
            )
            link, linked = AgentSkill.objects.get_or_create(
                agent=agent,
                skill=skill,
                defaults={"enabled": bool(s.get("enabled", True)), "updated_by": actor.name},
            )
            counts["skills"] += int(created or linked)
            skills[s["name"]] = skill

        entries = {}
        for e in data["entry"]:
            entry = Entry.objects.filter(owner=agent, name=e["name"], store=e["store"]).first()
            if entry is None:
                fields = {f: e.get("entry_type" if f == "type" else f) for f in ENTRY_FIELDS}
                entry = Entry.objects.create(
                    owner=agent, **{f: v for f, v in fields.items() if v is not None}
                )
                counts["entries"] += 1
            entries[e["ref"]] = entry

        memories, links = {}, []
        for m in data["memory"]:
            entry, skill = entries.get(m.get("entry")), skills.get(m.get("skill"))
            content_hash = Memory.hash_content(m["text"], m.get("key") or "", m.get("value"))
            found = Memory.objects.filter(
                owner=agent,
                store=m["store"],
                entry=entry,
                skill=skill,
                content_hash=content_hash,
                version=m["version"],
            ).first()
            if found is None:
                found = _memory_insert(agent, m, entry=entry, skill=skill, content_hash=content_hash)
                counts["memories"] += 1
                links.append(m)
            memories[m["ref"]] = found
        for m in links:  # supersession between imported memories, once all of them have ids
            update = {
                f"{f}_id": memories[m[f]].pk for f in ("supersedes", "superseded_by") if m.get(f) in memories
            }
            if update:
                memory_row_state(memories[m["ref"]], **update)

        for r in data["relation"]:
            source, target = entries[r["source"]], entries[r["target"]]
            if not EntryRelation.objects.filter(
                source=source, target=target, predicate=r["predicate"]
            ).exists():
                EntryRelation.objects.create(
                    source=source,
                    target=target,
                    predicate=r["predicate"],
                    sources=r.get("sources") or [],
                    valid_from=parse_date(r["valid_from"]) if r.get("valid_from") else None,
                    valid_to=parse_date(r["valid_to"]) if r.get("valid_to") else None,
                    author_kind=r.get("author_kind") or actor.kind,
                    author_name=r.get("author_name") or actor.name,
                )
                counts["relations"] += 1
        if any(counts.values()):
            audit_record(
                "agent.imported",
                actor=actor,
                owner=agent.name,
                object_type="agent",
                object_ids=[agent.pk],
                counts=counts,
            )
    return {"agent": agent.name, "written": counts}


def _memory_insert(agent: Agent, m: dict, *, entry, skill, content_hash: str) -> Memory:
    """One exported memory with its whole version history and its sources as they were recorded
    (fingerprints and snapshots kept: the provenance check compares against them)."""
    fields = {f: m[f] for f in MEMORY_FIELDS if f in m and m[f] is not None and f not in DATETIMES}
    return memory_row_exported(
        fields={
            "owner": agent,
            "entry": entry,
            "skill": skill,
            "position": m.get("position") if entry is not None else None,
            "version": m["version"],
            "content_hash": content_hash,
            **fields,
            **{f: _dt(m.get(f)) for f in DATETIMES if f != "created_at"},
        },
        versions=[
            {
                "content_hash": Memory.hash_content(v["text"], v.get("key") or "", v.get("value")),
                **{f: v.get(f) if v.get(f) is not None else "" for f in VERSION_FIELDS if f != "value"},
                "value": v.get("value"),
            }
            for v in m["versions"]
        ],
        sources=[
            {
                "kind": s["kind"],
                "ref": s["ref"],
                "fingerprint": s.get("fingerprint") or "",
                "snapshot": s.get("snapshot"),
                "state": s.get("state") or MemorySource.UNCHANGED,
                "checked_at": _dt(s.get("checked_at")),
            }
            for s in m.get("sources") or []
        ],
        created_at=_dt(m.get("created_at")),
    )
