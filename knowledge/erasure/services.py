"""Erase: take a plan's content for good, in one transaction, and keep its tombstones.

`erasure_apply` is the one entrance (the API, the console and `manage.py erase` call it); a dry
run answers the plan and writes nothing. `erasure_ledger_reapply` takes again whatever the ledger
names that is back (a restored backup, an import of an old export)."""

from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from knowledge.audit.services import audit_record
from knowledge.erasure.ledger import ledger_file_append, ledger_file_lines
from knowledge.erasure.selectors import (
    AgentStore,
    Plan,
    content_hash,
    entry_hash,
    erasure_plan,
    erasure_target,
)
from knowledge.errors import Conflict, Invalid
from knowledge.materials.storage import material_storage
from knowledge.memories.erased import memories_erase, memories_erased_source_requeue
from knowledge.models import (
    Agent,
    Channel,
    Entry,
    Episode,
    ErasedItem,
    Erasure,
    Material,
    MaterialVersion,
    Memory,
    Message,
    Person,
)
from knowledge.principal import Principal
from knowledge.signals import content_erased
from knowledge.termstats import term_stats_fold

# The content keys of a revision's snapshot, per object type: an erased row's copies in the
# audit trail lose them (ids, states and timestamps stay, so the trail still reads).
REVISION_CONTENT = {
    "memory": ["text", "key", "value", "status_reason", "stale_reason", "content_hash"],
    "entry": ["name", "summary", "aliases", "properties", "type"],
}
MAX_REASON = 2000


class AlreadyErased(Conflict):
    """What the erasure names is erased already (409)."""


@dataclass(frozen=True)
class ErasureResult:
    erasure: Erasure | None  # None for a dry run
    plan: Plan
    dry_run: bool

    def out(self) -> dict:
        data = {"dry_run": self.dry_run, **self.plan.preview()}
        if self.erasure is not None:
            data["erasure"] = self.erasure.pk
            data["reason"] = self.erasure.reason
            data["created_at"] = self.erasure.created_at.isoformat()
        return data


def erasure_apply(
    *, actor: Principal, kind: str, ref: str, reason: str, dry_run: bool = False
) -> ErasureResult:
    """Erase what (`kind`, `ref`) names and everything derived from it (selectors.erasure_plan),
    irreversibly, in one transaction, audited by ids, counts and reason; admins only (access).
    A dry run returns the same plan and writes nothing. Erasing what is erased already (or a
    person with nothing left) is AlreadyErased."""
    reason = (reason or "").strip()
    if not reason and not dry_run:
        raise Invalid({"reason": ["Say why: an erasure is audited with its reason."]})
    if len(reason) > MAX_REASON:
        raise Invalid({"reason": [f"At most {MAX_REASON} characters."]})
    row = erasure_target(actor, kind=kind, ref=ref)
    if dry_run:
        plan = erasure_plan(kind=kind, row=row)
        _refuse_empty(kind, row, plan)
        return ErasureResult(erasure=None, plan=plan, dry_run=True)
    with transaction.atomic():
        # The target's row lock orders two erasures of one thing (and a write revising that memory).
        # For a person it also holds back, until this commits, every message that names them as
        # speaker or arrives in their direct messages (the foreign-key check of such an insert
        # waits for these row locks), so no message lands between the plan and the commit.
        row = _locked(kind, row)
        plan = erasure_plan(kind=kind, row=row)
        _refuse_empty(kind, row, plan)
        erasure = _take(plan, actor=actor, reason=reason)
    return ErasureResult(erasure=erasure, plan=plan, dry_run=False)


def _locked(kind: str, row):
    if isinstance(row, AgentStore):
        Agent.objects.select_for_update().filter(pk=row.agent.pk).first()
        return row
    if kind == Erasure.PERSON:
        # The person's DM channels before the person: a message into a DM takes the same two rows
        # in that order when it commits (its deferred foreign-key checks: channel, then speaker),
        # and the other order deadlocked with such a commit landing between the two locks.
        list(
            Channel.objects.select_for_update()
            .filter(kind=Channel.KIND_DM, person_id=row.pk)
            .order_by("pk")
            .values_list("pk")
        )
    return type(row)._base_manager.select_for_update().get(pk=row.pk)


def _refuse_empty(kind: str, row, plan: Plan) -> None:
    if kind == Erasure.MEMORY and row.status == Memory.ERASED:
        raise AlreadyErased(f"Memory {row.pk} is erased already.", erased=True)
    if plan.is_empty():
        raise AlreadyErased(f"Nothing of {plan.label} is left to erase.", erased=True)


def _take(plan: Plan, *, actor: Principal, reason: str) -> Erasure:
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, text, channel_id FROM knowledge_message WHERE id = ANY(%s)", [sorted(plan.messages)]
        )
        rows = cursor.fetchall()
    messages = {pk: text for pk, text, _ in rows}
    channels = sorted({channel for _, _, channel in rows})
    episodes = {e.pk: e.embedding_text() for e in Episode.objects.filter(pk__in=plan.episodes)}
    entries = {
        pk: entry_hash(name, summary)
        for pk, name, summary in Entry.all_objects.filter(pk__in=plan.entries).values_list(
            "pk", "name", "summary"
        )
    }
    materials = _materials_held(plan.materials)
    erasure = Erasure.objects.create(
        kind=plan.kind,
        target=plan.target,
        actor_kind=actor.kind_label,
        actor_name=actor.name,
        reason=reason,
        counts=plan.counts(),
    )
    lexemes = _lexemes(memories=plan.memories, messages=list(messages), entries=list(entries))
    hashes = memories_erase(plan.memories, now=now)
    requeued = memories_erased_source_requeue(plan.requeued, now=now)
    with connection.cursor() as cursor:
        _sources_scrub(cursor, plan)
        _revisions_scrub(cursor, "memory", plan.memories)
        _revisions_scrub(cursor, "entry", plan.entries)
        _audit_reasons_scrub(cursor, "memory", plan.memories)
        _audit_reasons_scrub(cursor, "entry", plan.entries)
        cursor.execute(
            "UPDATE knowledge_webhookdelivery SET body = '{}', last_error = 'erased', "
            "state = CASE WHEN state IN ('pending', 'sending') THEN 'failed' ELSE state END "
            "WHERE memory_id = ANY(%s)",
            [sorted(plan.memories)],
        )
    _messages_delete(sorted(messages), sorted(episodes))
    if plan.kind == Erasure.PERSON:
        # The name stays (it is the key other rows and the ledger use); how they were shown goes.
        Person.objects.filter(name=plan.target).update(display_name="")
    _entries_empty(entries, now=now)
    _materials_delete(materials)
    items = [
        ErasedItem(erasure=erasure, kind="memory", ref=str(pk), content_hash=h) for pk, h in hashes.items()
    ]
    items += [
        ErasedItem(erasure=erasure, kind="message", ref=str(pk), content_hash=content_hash(t))
        for pk, t in messages.items()
    ]
    items += [
        ErasedItem(erasure=erasure, kind="episode", ref=str(pk), content_hash=content_hash(t))
        for pk, t in episodes.items()
    ]
    items += [
        ErasedItem(erasure=erasure, kind="entry", ref=str(pk), content_hash=h) for pk, h in entries.items()
    ]
    items += [
        ErasedItem(erasure=erasure, kind="material", ref=str(pk), content_hash=content_hash(held))
        for pk, (held, _) in materials.items()
    ]
    ErasedItem.objects.bulk_create(items, batch_size=2000, ignore_conflicts=True)
    lines = ledger_file_lines(erasure, items)
    transaction.on_commit(lambda: ledger_file_append(lines))
    term_stats_fold(lexemes)
    audit_record(
        "erasure.applied",
        actor=actor,
        object_type=plan.kind,
        object_ids=[plan.target],
        reason=reason,
        counts={**plan.counts(), "requeued_memories": len(requeued)},
        data={"erasure": erasure.pk, "requeued": requeued[:500]},
    )
    # Inside the transaction: the memory app drops what it derived (summaries, links, plans).
    content_erased.send(
        sender=Erasure,
        memory_ids=sorted(plan.memories),
        message_ids=sorted(messages),
        conversation_ids=sorted(plan.conversations),
        channel_ids=channels,
    )
    return erasure


def _entries_empty(ids, *, now) -> int:
    return (
        Entry.all_objects.filter(pk__in=ids)
        .exclude(name="", summary="", aliases=[], properties={}, type="")
        .update(name="", summary="", aliases=[], properties={}, type="", deleted_at=now, updated_at=now)
    )


def _materials_held(ids) -> dict[int, tuple[str, list[str]]]:
    """{material id: (what it held, for its content hash: title and the originals' sha256s), the
    originals' storage paths}."""
    held: dict[int, tuple[str, list[str]]] = {}
    for pk, title in Material.objects.filter(pk__in=ids).values_list("pk", "title"):
        versions = list(
            MaterialVersion.objects.filter(material_id=pk).order_by("number").values_list("sha256", "path")
        )
        held[pk] = ("\n".join([title, *(sha for sha, _ in versions)]), [path for _, path in versions])
    return held


def _materials_delete(held: dict[int, tuple[str, list[str]]]) -> None:
    """Delete the materials' rows and versions; their stored originals go once this commits (a
    rolled-back erasure keeps them; `erasure_ledger_reapply` deletes any left behind)."""
    if not held:
        return
    Material.objects.filter(pk__in=held).update(version=None)
    MaterialVersion.objects.filter(material_id__in=held).delete()
    Material.objects.filter(pk__in=held).delete()
    paths = [path for _, found in held.values() for path in found]
    transaction.on_commit(lambda: _originals_delete(paths))


def _originals_delete(paths: list[str]) -> None:
    storage = material_storage()
    for path in paths:
        if path and storage.exists(path):
            storage.delete(path)


def _originals_left(material_ids) -> list[str]:
    """Stored originals of erased materials still in storage (a crash between an erasure's commit
    and its file deletes, or a restore that put the archive's files back): storage keeps each
    material's originals under `<material id>/` (knowledge.materials.storage)."""
    storage, left = material_storage(), []
    for pk in material_ids:
        try:
            left += [f"{pk}/{name}" for name in storage.listdir(str(pk))[1]]
        except FileNotFoundError:
            continue
    return left


def _messages_delete(messages: list[int], episodes: list[int]) -> dict[str, int]:
    """Delete the messages and episodes, and what hangs on them (vectors, evidence links, the
    signals kept as those messages), set-wise. Returns how many messages and episodes went."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM knowledge_signal WHERE message_id = ANY(%s)", [messages])
        cursor.execute(
            "DELETE FROM knowledge_episode_evidence WHERE message_id = ANY(%s) OR episode_id = ANY(%s)",
            [messages, episodes],
        )
        cursor.execute(
            "UPDATE knowledge_message SET episode_id = NULL WHERE episode_id = ANY(%s)", [episodes]
        )
        cursor.execute("DELETE FROM knowledge_episode WHERE id = ANY(%s)", [episodes])
        gone_episodes = cursor.rowcount
        cursor.execute("DELETE FROM knowledge_messagevector WHERE message_id = ANY(%s)", [messages])
        cursor.execute("DELETE FROM knowledge_message WHERE id = ANY(%s)", [messages])
        return {"messages": cursor.rowcount, "episodes": gone_episodes}


def _lexemes(*, memories, messages, entries) -> list[str]:
    """The words the keyword statistics count for these rows (folded after they go)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT u.lexeme FROM ("
            "SELECT search AS v FROM knowledge_memory WHERE id = ANY(%s) "
            "UNION ALL SELECT search FROM knowledge_message WHERE id = ANY(%s) "
            "UNION ALL SELECT head_vector FROM knowledge_entry WHERE id = ANY(%s)"
            ") d, unnest(d.v) u",
            [sorted(memories), sorted(messages), sorted(entries)],
        )
        return [row[0] for row in cursor.fetchall()]


def _sources_scrub(cursor, plan: Plan) -> None:
    """Sources citing what goes keep no copy of it and read as deleted."""
    refs = [str(i) for i in plan.messages]
    conversations = [str(i) for i in plan.conversations]
    memories = [str(i) for i in plan.memories]
    cursor.execute(
        "UPDATE knowledge_memorysource SET snapshot = NULL, fingerprint = '', state = 'deleted' "
        "WHERE (kind = 'message' AND ref = ANY(%s)) OR (kind = 'conversation' AND ref = ANY(%s)) "
        "OR (kind = 'memory' AND ref = ANY(%s)) OR (kind = 'entry' AND ref = ANY(%s)) "
        "OR (kind = 'material' AND split_part(ref, '#', 1) = ANY(%s))",
        [refs, conversations, memories, [str(i) for i in plan.entries], sorted(plan.material_refs)],
    )


def _audit_reasons_scrub(cursor, object_type: str, ids) -> None:
    """The reasons audit events gave about an erased row (a reviewer's words may quote it) go;
    the events stay, with their ids, counts and times. An erasure's own events keep the admin's
    reason, as the ledger does."""
    if not ids:
        return
    cursor.execute(
        "UPDATE knowledge_auditevent SET reason = '' WHERE object_type = %s AND reason <> '' "
        "AND object_ids ?| %s::text[] AND action NOT LIKE 'erasure.%%'",
        [object_type, [str(i) for i in ids]],
    )


def _revisions_scrub(cursor, object_type: str, ids) -> None:
    if not ids:
        return
    keys = REVISION_CONTENT[object_type]
    cursor.execute(
        "UPDATE knowledge_revision SET before = CASE WHEN before IS NULL THEN NULL ELSE before - %s::text[] END, "
        "after = CASE WHEN after IS NULL THEN NULL ELSE after - %s::text[] END "
        "WHERE object_type = %s AND object_id = ANY(%s)",
        [keys, keys, object_type, [str(i) for i in ids]],
    )


def erasure_ledger_reapply(*, actor: Principal) -> dict[str, int]:
    """Take again every row the ledger names that holds content (after a restore of a backup
    taken before an erasure, or an import that brought a row back). Idempotent; one transaction.
    Returns how many of each kind it took."""
    taken = {"memories": 0, "messages": 0, "episodes": 0, "entries": 0, "materials": 0}
    with transaction.atomic():
        refs: dict[str, list[int]] = {"memory": [], "message": [], "episode": [], "entry": [], "material": []}
        for kind, ref in ErasedItem.objects.values_list("kind", "ref"):
            if kind in refs and ref.isdigit():
                refs[kind].append(int(ref))
        now = timezone.now()
        back = list(
            Memory.objects.filter(pk__in=refs["memory"])
            .exclude(status=Memory.ERASED)
            .values_list("pk", flat=True)
        )
        materials = Material.objects.filter(pk__in=refs["material"])
        material_refs = {str(pk) for pk in refs["material"]} | {m.source_ref for m in materials}
        lexemes = _lexemes(memories=back, messages=refs["message"], entries=refs["entry"])
        taken["memories"] = len(memories_erase(back, now=now))
        with connection.cursor() as cursor:
            plan = Plan(
                kind="",
                target="",
                label="",
                memories=set(refs["memory"]),
                messages=set(refs["message"]),
                entries=set(refs["entry"]),
                material_refs=material_refs,
            )
            _sources_scrub(cursor, plan)
            _revisions_scrub(cursor, "memory", refs["memory"])
            _revisions_scrub(cursor, "entry", refs["entry"])
            _audit_reasons_scrub(cursor, "memory", refs["memory"])
            _audit_reasons_scrub(cursor, "entry", refs["entry"])
        channels = sorted(
            set(Message.objects.filter(pk__in=refs["message"]).values_list("channel_id", flat=True))
        )
        taken.update(_messages_delete(sorted(refs["message"]), sorted(refs["episode"])))
        taken["entries"] = _entries_empty(refs["entry"], now=now)
        held = _materials_held(refs["material"])
        _materials_delete(held)
        taken["materials"] = len(held)
        left = _originals_left(refs["material"])
        transaction.on_commit(lambda: _originals_delete(left))
        term_stats_fold(lexemes)
        if any(taken.values()):
            audit_record("erasure.reapplied", actor=actor, object_type="erasure", counts=taken)
            content_erased.send(
                sender=Erasure,
                memory_ids=back,
                message_ids=refs["message"],
                conversation_ids=[],
                channel_ids=channels,
            )
    return taken
