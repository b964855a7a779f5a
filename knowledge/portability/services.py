"""One agent's knowledge as one versioned JSON Lines file, out and back in: the agent, its
curation guide and pinned memo, its skills' overlays, its entries with their blocks and
relations, and its memories with their versions, sources (fingerprints included) and validity.

The file names rows by export-local refs ("e1", "m7"), never by database ids. An import is
checked like the API before anything is written (every line and field, `checks.parse_export`;
every store it writes into, against the store vocabulary and who may write there) and written
in one transaction with one `agent.imported` audit event, authored by the importer. It never
overwrites an agent's own memo or guide unless told to (`replace`), leaves the workspace's
stores alone when it copies an agent under another name (unless `with_shared`), and skips what
is already there (an own row with that content; the same content in a workspace store; an entry
of that name in that store), so importing a file twice changes nothing. `preview` says all of
this without writing."""

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from django.db import transaction
from django.utils.dateparse import parse_date

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.erasure.selectors import entry_hash
from knowledge.errors import Invalid, Refused
from knowledge.memories.exported import memory_row_exported
from knowledge.memories.rows import memory_row_state
from knowledge.models import (
    Agent,
    AgentSkill,
    Channel,
    CurationGuide,
    Entry,
    EntryRelation,
    ErasedItem,
    Memory,
    Person,
    PinnedMemo,
    Skill,
)
from knowledge.portability.checks import (
    AGENT_NAME,
    DATETIMES,
    ENTRY_FIELDS,
    FORMAT,
    GUIDE_FIELDS,
    MAX_ERRORS,
    MEMORY_FIELDS,
    RELATION_FIELDS,
    SOURCE_FIELDS,
    VERSION,
    VERSION_FIELDS,
    parse_export,
    when,
)
from knowledge.portability.sources import cite, cited, rows_here, source_in, with_file_ref
from knowledge.principal import ADMIN, Principal
from knowledge.stores import parse_scope


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
        .exclude(status=Memory.ERASED)
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
            with_file_ref(
                {**{f: getattr(s, f) for f in SOURCE_FIELDS}, "checked_at": _iso(s.checked_at)},
                memory_ref,
                entry_ref,
            )
            for s in sorted(m.sources.all(), key=lambda s: (s.kind, s.ref))
        ]
        rows.append(row)

    relations = EntryRelation.objects.filter(source_id__in=entry_ref, target_id__in=entry_ref).order_by("id")
    for r in relations:
        row = {"type": "relation", "source": entry_ref[r.source_id], "target": entry_ref[r.target_id]}
        for f in RELATION_FIELDS:
            row[f] = _iso(getattr(r, f)) if f in ("valid_from", "valid_to") else getattr(r, f)
        row["sources"] = [with_file_ref(s, memory_ref, entry_ref) for s in row["sources"]]
        rows.append(row)
    return rows


# --- import ---------------------------------------------------------------------------------

COUNTS = ("agent", "guide", "memo", "skills", "entries", "memories", "relations")


@dataclass
class ImportPlan:
    """What an import writes (or, for a preview, would write): counts by kind and memories by
    store, what it skips as already present, the shared stores it leaves out, and the memo or
    guide it keeps because the agent has its own (`replace` not given)."""

    agent: str
    new_agent: bool
    written: dict = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    by_store: dict = field(default_factory=dict)  # store -> memories written
    queued: int = 0  # of the memories written, waiting for review
    present: dict = field(default_factory=lambda: {"entries": 0, "memories": 0})
    left_out: dict = field(default_factory=lambda: {"entries": 0, "memories": 0})
    kept: list = field(default_factory=list)  # "memo", "guide": not overwritten
    erased: int = 0  # memories and entries of the file an admin erased here: never brought back

    def as_dict(self) -> dict:
        return asdict(self)


class _Preview(Exception):
    """Raised inside the import's transaction to roll a preview back."""


def is_shared_store(store: str) -> bool:
    """Shared and channel stores belong to the workspace; self and private stores to the agent."""
    return not store.startswith(access.OWNER_ONLY_PREFIXES)


def agent_import(
    *,
    actor: Principal,
    lines: Iterable[str | bytes],
    as_name: str = "",
    replace: bool = False,
    with_shared: bool = False,
    preview: bool = False,
) -> dict:
    """Import a file from `agent_export` into the agent it names, or `as_name`. The whole file
    is checked (parse_export, then every store and name against the database) before the first
    write, and written in one transaction with one `agent.imported` audit event.

    The importer is the author of what comes in (the file's authors are kept in each version's
    reason); a live memory goes into force only for a trusted agent and without conflicting with
    an active one (else it waits for review, as the agent's own write would). An existing
    agent's memo and guide are overwritten only with `replace`. Under another agent's name the
    workspace's stores (shared, channel) are left alone unless `with_shared`. Anything already
    present (an own row as exported, or the same content in that store) is skipped, so a second
    import writes nothing. `preview` runs it all and rolls back: the plan of what it would do."""
    access.require_role(actor, ADMIN, "Only admins import knowledge.")
    data = parse_export(lines)
    spec = data["agent"][0]
    name = as_name or spec["name"]
    if not AGENT_NAME.fullmatch(name):
        raise Invalid({"as_name": [f"{name!r} is not an agent name (letters, digits, - and _)."]})
    existing = Agent.objects.filter(name=name).first()
    shared = with_shared or name == spec["name"]
    _check_targets(actor, data, existing or Agent(name=name), shared)
    try:
        with transaction.atomic():
            plan = _write(actor, data, name=name, existing=existing, replace=replace, shared=shared)
            if preview:
                raise _Preview
    except _Preview:
        pass
    return plan.as_dict()


def _check_targets(actor: Principal, data: dict, agent: Agent, shared: bool) -> None:
    """Every store the file writes into is a store (the API's vocabulary, in its canonical
    spelling), names a person who can be one or a channel that exists, and is one `actor` may
    write for `agent`. Invalid naming every line otherwise; nothing is written."""
    uses: dict[str, list[int]] = {}
    for kind in ("entry", "memory"):
        for row in data[kind]:
            uses.setdefault(row["store"], []).append(row["_line"])
    channels = set(
        Channel.objects.filter(name__in=[s[8:] for s in uses if s.startswith("channel:")]).values_list(
            "name", flat=True
        )
    )
    errors = []
    for store, lines in sorted(uses.items()):
        problem = _store_form(store)
        if problem is None and (shared or not is_shared_store(store)):  # else nothing goes there
            problem = _store_access(actor, agent, store, channels)
        errors.extend(f"line {n}: store: {problem}" for n in lines if problem)
    if errors:
        more = [f"(and {len(errors) - MAX_ERRORS} more)"] if len(errors) > MAX_ERRORS else []
        raise Invalid({"file": errors[:MAX_ERRORS] + more})


def _store_form(store: str) -> str | None:
    """Why `store` is not a store string as the API's vocabulary spells it, or None."""
    try:
        canonical = parse_scope(store)
    except Invalid:
        canonical = None
    if canonical != store:
        return f"{store!r} is not a store (self, shared, private:<person> or channel:<channel>)"
    if store.startswith("private:") and not AGENT_NAME.fullmatch(store[8:]):
        return f"{store!r} is not a store: {store[8:]!r} cannot be a person's name"
    return None


def _store_access(actor: Principal, agent: Agent, store: str, channels: set) -> str | None:
    if store.startswith("channel:") and store[8:] not in channels:
        return f"there is no channel named {store[8:]}"
    try:
        access.check_write(actor, owner=agent, store=store)
    except Refused as exc:
        return str(exc.detail)
    return None


def _write(actor, data, *, name, existing, replace, shared) -> ImportPlan:
    from knowledge.principals import services as principals

    spec = data["agent"][0]
    plan = ImportPlan(agent=name, new_agent=existing is None)
    agent = existing
    if agent is None:
        agent = principals.agent_create(
            actor=actor,
            name=name,
            trusted=bool(spec.get("trusted")),
            instructions=spec.get("instructions") or "",
        )
        plan.written["agent"] = 1
    agent = Agent.objects.select_for_update().get(pk=agent.pk)  # one import of an agent at a time
    _guide_and_memo(actor, agent, data, plan, replace=replace)
    skills = _skills(actor, agent, data, plan)
    included = [row for row in data["memory"] if shared or not is_shared_store(row["store"])]
    plan.left_out["memories"] = len(data["memory"]) - len(included)
    people = {row["store"][8:] for row in included if row["store"].startswith("private:")}
    people |= {row["store"][8:] for row in data["entry"] if row["store"].startswith("private:")}
    known = set(Person.objects.filter(name__in=people).values_list("name", flat=True))
    for person in sorted(people - known):
        principals.person_get_or_create(actor=actor, name=person)
    entries, held = _entries(actor, agent, data, plan, shared=shared)
    memories, present = _memories(actor, agent, spec["name"], included, plan, entries=entries, skills=skills)
    # Every row of the file that is here now (written, or found present), by its file ref.
    here = {
        "memory": {ref: memory.pk for ref, (memory, _) in memories.items()} | present,
        "entry": {ref: entry.pk for ref, entry in entries.items()} | held,
    }
    _relations(actor, data, plan, entries, here)
    if memories:
        _link(memories, here["memory"])
        cite(memories, here)
    if any(plan.written.values()):
        audit_record(
            "agent.imported",
            actor=actor,
            owner=agent.name,
            object_type="agent",
            object_ids=[agent.pk],
            counts=plan.written,
            data={"by_store": plan.by_store, "kept": plan.kept, "left_out": plan.left_out},
        )
    return plan


def _guide_and_memo(actor, agent, data, plan, *, replace: bool) -> None:
    """The file's guide and memo. Into an agent that existed before the import they are written
    only with `replace`, empty or missing ones too (an import once silently replaced or filled
    them); what is not written is listed in `plan.kept`."""
    guarded = not plan.new_agent and not replace
    for g in data["guide"]:
        guide = CurationGuide.objects.filter(owner=agent).first()
        changed = {f: g[f] for f in GUIDE_FIELDS if g.get(f) is not None}
        if guide is not None:
            changed = {f: v for f, v in changed.items() if getattr(guide, f) != v}
        if changed and guarded:
            plan.kept.append("guide")
            continue
        if guide is not None:
            guide.version += bool(changed)
        if changed or guide is None:
            guide = guide or CurationGuide(owner=agent)
            for f, v in changed.items():
                setattr(guide, f, v)
            guide.updated_by = actor.name
            guide.save()
            plan.written["guide"] = 1
    for m in data["memo"]:
        memo = PinnedMemo.objects.filter(agent=agent).first()
        if memo is not None and memo.text == m["text"]:
            continue
        if guarded:
            plan.kept.append("memo")
            continue
        memo = memo or PinnedMemo(agent=agent)
        memo.text, memo.version = m["text"], memo.version + 1
        memo.updated_by_kind, memo.updated_by_name = actor.kind_label, actor.name
        memo.save()
        plan.written["memo"] = 1


def _skills(actor, agent, data, plan) -> dict:
    """The skills the file names: a skill of that name is used as it is (its base instructions
    are a person's, never overwritten by a file); a new one is created. The agent's overlay
    enablement comes with it."""
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
        enabled = s.get("enabled")
        _, linked = AgentSkill.objects.get_or_create(
            agent=agent,
            skill=skill,
            defaults={"enabled": True if enabled is None else enabled, "updated_by": actor.name},
        )
        plan.written["skills"] += int(created or linked)
        skills[s["name"]] = skill
    return skills


def _entries(actor, agent, data, plan, *, shared: bool) -> tuple[dict, dict]:
    """ref -> the entry each file entry is now: the agent's own entry of that name in that store,
    or a new one. A workspace-store entry another agent already holds under that name is
    present (its blocks and relations are skipped; ref -> its id in the second dict, for the
    sources that cite it); one in a store left out is left out."""
    entries, held_by_others = {}, {}
    hashes = {e["ref"]: entry_hash(e["name"], e.get("summary") or "") for e in data["entry"]}
    erased = set(
        ErasedItem.objects.filter(kind="entry", content_hash__in=set(hashes.values())).values_list(
            "content_hash", flat=True
        )
    )
    for e in data["entry"]:
        if hashes[e["ref"]] in erased:  # erased here since the export: never brought back
            plan.erased += 1
            continue
        if not shared and is_shared_store(e["store"]):
            plan.left_out["entries"] += 1
            continue
        entry = Entry.objects.filter(owner=agent, name=e["name"], store=e["store"]).first()
        held = entry is None and is_shared_store(e["store"])
        other = held and Entry.objects.filter(name=e["name"], store=e["store"]).order_by("pk").first()
        if other:
            plan.present["entries"] += 1
            held_by_others[e["ref"]] = other.pk
            continue
        if entry is None:
            fields = {f: e.get("entry_type" if f == "type" else f) for f in ENTRY_FIELDS}
            fields.update(author_kind=actor.kind_label, author_name=actor.name)
            entry = Entry.objects.create(owner=agent, **{f: v for f, v in fields.items() if v is not None})
            plan.written["entries"] += 1
        entries[e["ref"]] = entry
    return entries, held_by_others


def _memories(actor, agent, file_agent, rows, plan, *, entries, skills) -> tuple[dict, dict]:
    """Insert each memory not present yet: ref -> the new memory and its file row, and ref ->
    the id of the memory each present one is."""
    hashes = {
        row["ref"]: Memory.hash_content(row["text"], row.get("key") or "", row.get("value")) for row in rows
    }
    stores = {row["store"] for row in rows}
    own, anyones = {}, {}  # -> the id of the oldest such memory
    for pk, owner, store, entry, skill, content in (
        Memory.objects.filter(content_hash__in=set(hashes.values()), store__in=stores)
        .order_by("pk")
        .values_list("pk", "owner_id", "store", "entry_id", "skill_id", "content_hash")
    ):
        if owner == agent.pk:
            own.setdefault((store, entry, skill, content), pk)
        if entry is None and skill is None:
            anyones.setdefault((store, content), pk)
    # An older export may hold what was erased since: the erasure ledger's content hashes say so.
    erased = set(
        ErasedItem.objects.filter(kind="memory", content_hash__in=set(hashes.values())).values_list(
            "content_hash", flat=True
        )
    )
    active = _active_by_key(agent, rows)
    here = rows_here(rows)
    new, present = {}, {}
    for row in rows:
        if hashes[row["ref"]] in erased:
            plan.erased += 1
            continue
        if row.get("entry") is not None and row["entry"] not in entries:
            plan.present["memories"] += 1  # its entry is present as another agent's
            continue
        entry, skill, content = (
            entries.get(row.get("entry")),
            skills.get(row.get("skill")),
            hashes[row["ref"]],
        )
        loose_shared = entry is None and skill is None and is_shared_store(row["store"])
        found = own.get((row["store"], entry and entry.pk, skill and skill.pk, content)) or (
            loose_shared and anyones.get((row["store"], content))
        )
        if found:
            plan.present["memories"] += 1
            present[row["ref"]] = found
            continue
        status, reason = _status(agent, row, content, active)
        memory = _memory_insert(
            actor,
            agent,
            file_agent,
            row,
            entry=entry,
            skill=skill,
            content_hash=content,
            status=status,
            reason=reason,
            here=here,
        )
        new[row["ref"]] = (memory, row)
        plan.written["memories"] += 1
        plan.by_store[row["store"]] = plan.by_store.get(row["store"], 0) + 1
        plan.queued += status == Memory.QUEUED
    return new, present


def _active_by_key(agent, rows) -> dict:
    """(store, key) -> [(content hash, valid_from, valid_to)] of the active memories a keyed
    memory of the file would sit beside (the agent's own in its own stores, anyone's in a
    workspace store)."""
    keys = {(row["store"], row["key"]) for row in rows if row.get("key")}
    found: dict = {}
    if not keys:
        return found
    for owner, store, key, content, start, end in Memory.objects.filter(
        status=Memory.ACTIVE, store__in={s for s, _ in keys}, key__in={k for _, k in keys}
    ).values_list("owner_id", "store", "key", "content_hash", "valid_from", "valid_to"):
        if owner == agent.pk or is_shared_store(store):
            found.setdefault((store, key), []).append((content, start, end))
    return found


def _status(agent, row, content, active) -> tuple[str, str]:
    """The state a file memory comes in with: what it was when it is no longer live (history
    stays history); a live one goes into force only as the agent's own write would — for a
    trusted agent, and not beside an active memory with its key and another value over the same
    time (no silent conflicts); otherwise it waits for review."""
    status, reason = row["status"], row.get("queue_reason") or ""
    if status not in Memory.LIVE:
        return status, reason
    if not agent.trusted:
        return Memory.QUEUED, reason or "new"
    start, end = when(row.get("valid_from")), when(row.get("valid_to"))
    for other, other_start, other_end in active.get((row["store"], row.get("key")), []):
        apart = (end and other_start and end <= other_start) or (other_end and start and other_end <= start)
        if other != content and not apart and status == Memory.ACTIVE:
            return Memory.QUEUED, "conflict"
    return status, reason


def _link(new: dict, here: dict) -> None:
    """Supersession of the imported memories, once all of them have ids: the file's refs become
    the rows they are here (imported, or found present)."""
    for memory, row in new.values():
        update = {f"{f}_id": here[row[f]] for f in ("supersedes", "superseded_by") if row.get(f) in here}
        if update:
            memory_row_state(memory, **update)


def _relations(actor, data, plan, entries, here) -> None:
    for r in data["relation"]:
        source, target = entries.get(r["source"]), entries.get(r["target"])
        if source is None or target is None:  # an end left out or held by another agent
            continue
        if EntryRelation.objects.filter(source=source, target=target, predicate=r["predicate"]).exists():
            continue
        EntryRelation.objects.create(
            source=source,
            target=target,
            predicate=r["predicate"],
            sources=[
                cited(s, here) if isinstance(s, dict) and s.get("file_ref") is not None else s
                for s in r["sources"]
            ],
            valid_from=when(r.get("valid_from"), parse_date),
            valid_to=when(r.get("valid_to"), parse_date),
            author_kind=actor.kind_label,
            author_name=actor.name,
        )
        plan.written["relations"] += 1


def _imported(reason: str, row: dict, file_agent: str) -> str:
    """A version's reason with the author the file gave it: kept as a record, not as a claim."""
    said = f"{row.get('author_kind') or '?'}:{row.get('author_name') or '?'}"
    return "; ".join(filter(None, [reason, f"imported from {file_agent}'s file, written there by {said}"]))


def _memory_insert(
    actor, agent, file_agent, m, *, entry, skill, content_hash, status, reason, here: dict
) -> Memory:
    """One file memory with its whole version history and its sources as they were recorded
    (fingerprints and snapshots kept: the provenance check compares against them; `source_in`),
    authored by the importer."""
    # The state _status decided and the importer as author, over what the file says; the row
    # goes in through the import's one row function.
    decided = {
        "status": status,
        "queue_reason": reason,
        "author_kind": actor.kind_label,
        "author_name": actor.name,
    }
    fields = {f: m[f] for f in MEMORY_FIELDS if m.get(f) is not None and f not in DATETIMES} | decided
    return memory_row_exported(
        fields={
            "owner": agent,
            "entry": entry,
            "skill": skill,
            "position": m.get("position") if entry is not None or skill is not None else None,
            "version": m["version"],
            "content_hash": content_hash,
            **fields,
            **{f: when(m.get(f)) for f in DATETIMES if f != "created_at"},
        },
        versions=[
            {
                "version": v["version"],
                "text": v["text"],
                "key": v.get("key") or "",
                "value": v.get("value"),
                "content_hash": Memory.hash_content(v["text"], v.get("key") or "", v.get("value")),
                "author_kind": actor.kind_label,
                "author_name": actor.name,
                "reason": _imported(v.get("reason") or "", v, file_agent),
            }
            for v in m["versions"]
        ],
        sources=[
            source_in(s, here)
            for s in m.get("sources") or []
            if s.get("file_ref") is None  # cited once every row of the file has its id (cite)
        ],
        created_at=when(m.get("created_at")),
    )
