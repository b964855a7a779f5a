"""How each object type is restored: a `Restorer` knows how to lock and read an object's current
value, which of its fields are content, and how to write a value back. The base types (entries,
memories, relations, curation guides, settings, pinned memos) are registered here; other apps
register theirs with `register_restorer()` (in their AppConfig.ready). The restore itself is
`knowledge.restore.services.audit_restore`."""

from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import snapshot
from knowledge.entries.guides import guide_snapshot
from knowledge.entries.services import (
    block_snapshot,
    entry_blocks_reembed,
    entry_snapshot,
    relation_snapshot,
)
from knowledge.memories.exported import memory_row_recreate
from knowledge.memories.rows import memory_row_revise, memory_row_state
from knowledge.models import (
    CurationGuide,
    Entry,
    EntryRelation,
    Memory,
    MemorySource,
    PinnedMemo,
    Setting,
)


class Restorer:
    """How to restore one object type. Subclasses set `object_type`, `model` and
    `content_fields`, and may override `read`, `write` and `label`."""

    object_type = ""
    model = None
    content_fields: tuple[str, ...] = ()
    # What restoring an object's creation does to it, as the preview and the result say it.
    removal = "delete"
    # Fields a restore never writes directly (derived, or written by the row operations).
    derived_fields: tuple[str, ...] = ("id", "created_at", "updated_at")

    def content(self, value: dict | None) -> dict | None:
        if value is None:
            return None
        return {k: value[k] for k in self.content_fields if k in value}

    def differs(self, current: dict | None, expected: dict | None) -> list[str]:
        """The content fields in which `current` differs from `expected` (compared on the fields
        `expected` records, so snapshots that hold fewer fields still compare)."""
        if current is None or expected is None:
            if current is None and expected is None:
                return []
            return ["no longer exists"] if current is None else ["exists again"]
        a, b = self.content(current), self.content(expected)
        return [k for k in b if a.get(k) != b[k]]

    def lock(self, ids: list[str], rows: dict | None = None) -> dict[str, dict | None]:
        """Row-lock the objects and return their current values (None: no such object). The
        locked objects go into `rows` (by id), for `write`."""
        locked = self.model._base_manager.select_for_update(of=("self",)).filter(pk__in=[int(i) for i in ids])
        found = {}
        for obj in locked.order_by("pk"):
            found[str(obj.pk)] = self.read(obj)
            if rows is not None:
                rows[str(obj.pk)] = obj
        return {i: found.get(i) for i in ids}

    def read(self, obj) -> dict:
        return snapshot(obj)

    def label(self, object_id: str, value: dict | None) -> str:
        return f"{self.object_type} {object_id}"

    def scope(self, value: dict | None) -> tuple[str, str]:
        return (value or {}).get("store", ""), ""

    def write(
        self, object_id: str, current: dict | None, target: dict | None, *, actor, fields, row=None
    ) -> dict | None:
        """Make the object equal `target` on `fields` (None: remove it); return its new value.
        `row` is the object `lock` locked, if any."""
        raise NotImplementedError


RESTORERS: dict[str, Restorer] = {}


def register_restorer(restorer: Restorer) -> None:
    RESTORERS[restorer.object_type] = restorer


class EntryRestorer(Restorer):
    object_type, model = "entry", Entry
    content_fields = ("name", "type", "aliases", "summary", "properties", "store", "owner_id", "deleted_at")
    derived_fields = ("id", "created_at", "updated_at", "version", *Entry.DERIVED_FIELDS)
    removal = "mark deleted"  # kept, marked deleted

    def read(self, obj):
        return entry_snapshot(obj)

    def label(self, object_id, value):
        return f"entry {object_id}" + (f" “{value['name']}”" if value and value.get("name") else "")

    def scope(self, value):
        return (value or {}).get("store", ""), ""

    def write(self, object_id, current, target, *, actor, fields, row=None):
        if current is None:
            entry = Entry(pk=int(object_id))
            fields = [k for k in target if k not in self.derived_fields]
        else:
            entry = Entry.all_objects.get(pk=int(object_id))
        if target is None:  # restoring a creation: the entry goes (kept, marked deleted)
            entry.deleted_at = timezone.now()
        for field in fields:
            setattr(entry, field, target[field])
        if current is not None:
            entry.version += 1
        entry.author_kind, entry.author_name = actor.kind_label, actor.name
        entry.save()
        if current is not None and "name" in fields:
            entry_blocks_reembed(entry)
        return entry_snapshot(Entry.all_objects.get(pk=entry.pk))


class MemoryRestorer(Restorer):
    """Entry blocks and loose memories. A text comes back as a new version (the history keeps
    every text); a memory whose creation is restored is retired, not deleted."""

    object_type, model = "memory", Memory
    removal = "invalidate"  # a memory is never deleted: its row stays, withdrawn
    content_fields = (
        "text",
        "key",
        "value",
        "status",
        "entry_id",
        "skill_id",
        "position",
        "tier",
        "category",
        "confidence",
        "pinned",
        "valid_from",
        "valid_to",
        "expires_at",
        "supersedes_id",
        "superseded_by_id",
        "store",
        "owner_id",
        "sources",
    )
    derived_fields = (
        "id",
        "created_at",
        "updated_at",
        "version",
        "content_hash",
        "author_kind",
        "author_name",
        "embedding",
        "embedding_model",
    )

    def lock(self, ids, rows=None):
        locked = (
            Memory.objects.select_for_update(of=("self",))
            .filter(pk__in=[int(i) for i in ids])
            .prefetch_related("sources")
            .order_by("pk")
        )
        found = {}
        for memory in locked:
            found[str(memory.pk)] = block_snapshot(memory)
            if rows is not None:
                rows[str(memory.pk)] = memory
        return {i: found.get(i) for i in ids}

    def label(self, object_id, value):
        if value and value.get("entry_id"):
            return f"block {object_id} of entry {value['entry_id']}"
        if value and value.get("skill_id"):
            return f"lesson {object_id} of skill {value['skill_id']}"
        return f"memory {object_id}"

    def write(self, object_id, current, target, *, actor, fields, row=None):
        reason = "restored from the audit trail"
        if current is None:
            memory = memory_row_recreate(
                pk=int(object_id),
                fields={k: v for k, v in target.items() if k not in ("id", "sources")},
                author_kind=actor.kind_label,
                author_name=actor.name,
                reason=reason,
            )
            self._sources(memory, target.get("sources", []))
            return block_snapshot(Memory.objects.get(pk=memory.pk))
        memory = row if row is not None else Memory.objects.get(pk=int(object_id))
        sources = current.get("sources", [])
        if target is None:
            memory_row_state(memory, status=Memory.INVALIDATED, status_reason="withdrawn by a restore")
            return {**snapshot(memory), "sources": sources}
        content = {k: target[k] for k in ("text", "key", "value") if k in target}
        if any(getattr(memory, k) != v for k, v in content.items()):
            memory_row_revise(
                memory=memory,
                text=content.get("text", memory.text),
                key=content.get("key"),
                value=content.get("value", ...),
                author_kind=actor.kind_label,
                author_name=actor.name,
                reason=reason,
            )
        plain = [f for f in fields if f not in ("sources", "text", "key", "value")]
        if plain:
            memory_row_state(memory, **{field: target[field] for field in plain})
        if "sources" in fields:
            self._sources(memory, target["sources"])
            sources = sorted(list(pair) for pair in target["sources"])
        return {**snapshot(memory), "sources": sources}

    @staticmethod
    def _sources(memory, pairs):
        wanted = {tuple(p) for p in pairs}
        have = {(s.kind, s.ref): s.pk for s in MemorySource.objects.filter(memory=memory)}
        MemorySource.objects.filter(pk__in=[pk for pair, pk in have.items() if pair not in wanted]).delete()
        MemorySource.objects.bulk_create(
            [MemorySource(memory=memory, kind=k, ref=r) for k, r in sorted(wanted - set(have))]
        )


class RelationRestorer(Restorer):
    object_type, model = "relation", EntryRelation
    content_fields = (
        "source_id",
        "predicate",
        "target_id",
        "sources",
        "valid_from",
        "valid_to",
        "author_kind",
        "author_name",
    )

    def read(self, obj):
        return relation_snapshot(obj)

    def label(self, object_id, value):
        if value:
            return f"relation {object_id} ({value['source_id']} {value['predicate']} {value['target_id']})"
        return f"relation {object_id}"

    def write(self, object_id, current, target, *, actor, fields, row=None):
        if target is None:
            EntryRelation.objects.filter(pk=int(object_id)).delete()
            return None
        if current is None:
            relation = EntryRelation(pk=int(object_id))
            fields = [k for k in target if k not in self.derived_fields]
        else:
            relation = EntryRelation.objects.get(pk=int(object_id))
        for field in fields:
            setattr(relation, field, target[field])
        relation.save(force_insert=current is None)
        return relation_snapshot(EntryRelation.objects.get(pk=relation.pk))


class GuideRestorer(Restorer):
    object_type, model = "guide", CurationGuide
    content_fields = ("domain_types", "taxonomy", "page_thresholds", "update_rules", "owner_id")
    derived_fields = ("id", "created_at", "updated_at", "version", "updated_by", "store")

    def read(self, obj):
        return guide_snapshot(obj)

    def label(self, object_id, value):
        return f"curation guide {object_id}" + (f" of agent {value['owner_id']}" if value else "")

    def scope(self, value):
        return CurationGuide.STORE, ""

    def write(self, object_id, current, target, *, actor, fields, row=None):
        if target is None:
            CurationGuide.objects.filter(pk=int(object_id)).delete()
            return None
        if current is None:
            guide = CurationGuide(pk=int(object_id), version=target.get("version", 1) - 1)
            fields = [k for k in target if k not in self.derived_fields]
        else:
            guide = CurationGuide.objects.get(pk=int(object_id))
        for field in fields:
            setattr(guide, field, target[field])
        guide.version += 1
        guide.updated_by = actor.name
        guide.save(force_insert=current is None)
        return guide_snapshot(guide)


class SettingRestorer(Restorer):
    object_type, model = "setting", Setting
    content_fields = ("value",)
    derived_fields = ()

    def lock(self, ids, rows=None):
        from knowledge.settings_store import setting_cache_clear, setting_get

        list(Setting.objects.select_for_update().filter(name__in=ids).order_by("name"))
        setting_cache_clear()  # compare with the database, not this process's cached copy
        return {name: {"value": setting_get(name)} for name in ids}

    def label(self, object_id, value):
        return f"setting {object_id}"

    def write(self, object_id, current, target, *, actor, fields, row=None):
        from knowledge.settings_store import setting_cache_clear

        Setting.objects.update_or_create(name=object_id, defaults={"value": (target or {}).get("value")})
        setting_cache_clear()
        transaction.on_commit(setting_cache_clear)
        return {"value": (target or {}).get("value")}


class MemoRestorer(Restorer):
    """An agent's pinned memo: its text comes back as a new version. A memo whose first version
    is restored becomes empty (the row stays: an agent has one memo)."""

    object_type, model = "memo", PinnedMemo
    content_fields = ("text", "agent_id")
    derived_fields = ("id", "created_at", "updated_at", "version", "updated_by_kind", "updated_by_name")

    def label(self, object_id, value):
        return f"pinned memo {object_id}" + (f" of agent {value['agent_id']}" if value else "")

    def scope(self, value):
        return "self", ""

    def write(self, object_id, current, target, *, actor, fields, row=None):
        memo = PinnedMemo.objects.get(pk=int(object_id))
        memo.text = (target or {}).get("text", "")
        memo.version += 1
        memo.updated_by_kind, memo.updated_by_name = actor.kind_label, actor.name
        memo.save()
        return snapshot(memo)


for _restorer in (
    EntryRestorer(),
    MemoryRestorer(),
    RelationRestorer(),
    GuideRestorer(),
    SettingRestorer(),
    MemoRestorer(),
):
    register_restorer(_restorer)
