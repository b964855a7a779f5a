"""Audit restore: one record or a batch, newest first, all or nothing; a restore is audited and
restorable; a delete record brings an entry back whole."""

import pytest

from knowledge.entries import services as entries
from knowledge.entries.guides import guide_update
from knowledge.errors import Refused as PermissionDenied
from knowledge.models import AuditEvent, CurationGuide, Entry, EntryRelation, Memory, Setting
from knowledge.principal import Principal
from knowledge.restore.services import RestoreConflict, audit_restore
from knowledge.settings_store import setting_get
from tests.factory import make_entry

ADMIN = Principal(kind="person", name="adam", role="admin")
EVIDENCE = [{"kind": "message", "ref": "m-1"}]


@pytest.fixture
def three_changes(world):
    """An entry with a block and a neighbour, then three audited changes to it."""
    entry = make_entry(world.copilot, name="VPN", summary="old summary", blocks=["Client 5.2.1."])
    team = make_entry(world.copilot, name="IT team")
    block = entry.created_blocks[0]
    corrected = entries.block_correct(
        actor=ADMIN, entry_id=entry.pk, block_id=block.pk, text="Client 5.2.2.", reason="typo"
    )
    updated = entries.entry_update(actor=ADMIN, entry_id=entry.pk, summary="new summary")
    related = entries.relation_add(
        actor=ADMIN, entry_id=entry.pk, predicate="owned by", target_id=team.pk, sources=EVIDENCE
    )
    events = [corrected.audit_event.pk, updated.audit_event.pk, related.audit_event.pk]
    return entry, block, related, events


def _state(entry, block):
    entry = Entry.all_objects.get(pk=entry.pk)
    return (
        entry.summary,
        Memory.objects.get(pk=block.pk).text,
        EntryRelation.objects.filter(source=entry).count(),
    )


def test_a_batch_of_three_records_is_restored_atomically_and_audited(world, three_changes):
    entry, block, relation, events = three_changes
    assert _state(entry, block) == ("new summary", "Client 5.2.2.", 1)
    response = world.client("admin").post("/api/audit/restore", {"events": events}, format="json")
    assert response.status_code == 200, response.json()
    assert _state(entry, block) == ("old summary", "Client 5.2.1.", 0)
    memory = Memory.objects.get(pk=block.pk)
    assert memory.version == 3 and memory.author_name == "adam"  # the old text is a new version
    assert list(memory.versions.order_by("version").values_list("text", flat=True)) == [
        "Client 5.2.1.",
        "Client 5.2.2.",
        "Client 5.2.1.",
    ]
    restore = AuditEvent.objects.get(pk=response.json()["audit_event"])
    assert restore.action == "audit.restored" and restore.actor_name == "adam"
    assert sorted(int(i) for i in restore.object_ids) == sorted(events)
    assert restore.counts == {"events": 3, "records": 3}
    assert {r.object_type for r in restore.revisions.all()} == {"entry", "memory", "relation"}


def test_the_same_batch_after_a_later_edit_writes_nothing_and_names_the_conflict(world, three_changes):
    entry, block, relation, events = three_changes
    entries.entry_update(actor=ADMIN, entry_id=entry.pk, summary="edited again")
    before = AuditEvent.objects.count()
    response = world.client("admin").post("/api/audit/restore", {"events": events}, format="json")
    assert response.status_code == 409
    body = response.json()
    assert [(c["object_type"], c["object_id"], c["fields"]) for c in body["conflicts"]] == [
        ("entry", str(entry.pk), ["summary"])
    ]
    assert f"entry {entry.pk}" in body["error"] and "summary" in body["error"]
    assert _state(entry, block) == ("edited again", "Client 5.2.2.", 1)  # nothing restored
    assert AuditEvent.objects.count() == before
    preview = world.client("admin").post(
        "/api/audit/restore", {"events": events, "preview": True}, format="json"
    )
    assert preview.status_code == 409


def test_the_console_shows_the_conflict_and_restores_nothing(client, world, three_changes):
    entry, block, relation, events = three_changes
    entries.block_correct(
        actor=ADMIN, entry_id=entry.pk, block_id=block.pk, text="Client 6.", reason="upgrade"
    )
    client.force_login(world.admin)
    preview = client.get("/knowledge/audit/restore", {"events": events})
    assert preview.status_code == 409
    assert b"Nothing was restored" in preview.content
    assert f"block {block.pk} of entry {entry.pk} changed since event {events[0]}".encode() in preview.content
    posted = client.post("/knowledge/audit/restore", {"events": events})
    assert posted.status_code == 409
    assert _state(entry, block) == ("new summary", "Client 6.", 1)


def test_the_console_previews_then_restores_a_batch(client, world, three_changes):
    entry, block, relation, events = three_changes
    client.force_login(world.admin)
    preview = client.get("/knowledge/audit/restore", {"events": events})
    assert preview.status_code == 200
    assert b"Nothing has changed yet" in preview.content
    assert b"Client <del>5.2.2.</del>" in preview.content and b"Client <ins>5.2.1.</ins>" in preview.content
    assert _state(entry, block) == ("new summary", "Client 5.2.2.", 1)
    done = client.post("/knowledge/audit/restore", {"events": events})
    assert done.status_code == 302
    assert _state(entry, block) == ("old summary", "Client 5.2.1.", 0)
    restore = AuditEvent.objects.get(action="audit.restored")
    assert done["Location"] == f"/knowledge/audit/{restore.pk}/"


def test_preview_returns_every_record_and_writes_nothing(world, three_changes):
    entry, block, relation, events = three_changes
    before = AuditEvent.objects.count()
    response = world.client("admin").post(
        "/api/audit/restore", {"events": events, "preview": True}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["restored"] is False and body["audit_event"] is None
    assert [r["event"] for r in body["records"]] == list(reversed(events))  # newest first
    text_change = next(r for r in body["records"] if r["object_type"] == "memory")
    assert text_change["changes"] == [{"field": "text", "from": "Client 5.2.2.", "to": "Client 5.2.1."}]
    relation_removal = next(r for r in body["records"] if r["object_type"] == "relation")
    assert relation_removal["after"] is None
    assert _state(entry, block) == ("new summary", "Client 5.2.2.", 1)
    assert AuditEvent.objects.count() == before


def test_only_admins_restore(client, world, three_changes):
    entry, block, relation, events = three_changes
    assert (
        world.client("reviewer").post("/api/audit/restore", {"events": events}, format="json").status_code
        == 403
    )
    assert (
        world.client("copilot").post("/api/audit/restore", {"events": events}, format="json").status_code
        == 403
    )
    assert world.client("reviewer").get("/api/audit").status_code == 200
    assert world.client("copilot").get("/api/audit").status_code == 403
    client.force_login(world.reviewer)
    assert client.post("/knowledge/audit/restore", {"events": events}).status_code == 403
    assert client.get("/knowledge/audit/restore", {"events": events}).status_code == 403
    assert client.get("/knowledge/audit/").status_code == 200
    assert b'name="events"' not in client.get("/knowledge/audit/").content
    with pytest.raises(PermissionDenied):
        audit_restore(actor=Principal(kind="person", name="rita", role="reviewer"), event_ids=events)
    assert _state(entry, block) == ("new summary", "Client 5.2.2.", 1)


def test_deleting_an_entry_and_restoring_its_delete_record_brings_it_back_exactly(world):
    alice = make_entry(
        world.copilot, name="Alice", blocks=["Leads IT.", {"text": "Vegetarian.", "sources": EVIDENCE}]
    )
    it = make_entry(world.copilot, name="IT team")
    out = entries.relation_add(
        actor=ADMIN, entry_id=alice.pk, predicate="member of", target_id=it.pk, sources=EVIDENCE
    )
    back = entries.relation_add(
        actor=ADMIN, entry_id=it.pk, predicate="led by", target_id=alice.pk, sources=EVIDENCE
    )
    removed = entries.block_add(actor=ADMIN, entry_id=alice.pk, text="Temporary note.")
    entries.block_remove(actor=ADMIN, entry_id=alice.pk, block_id=removed.pk)

    def picture():
        entry = Entry.all_objects.get(pk=alice.pk)
        blocks = list(
            Memory.objects.filter(entry=entry)
            .order_by("pk")
            .values_list("pk", "position", "text", "status", "version", "author_name", "content_hash")
        )
        sources = sorted(
            Memory.objects.filter(entry=entry).values_list("sources__kind", "sources__ref"), key=str
        )
        relations = sorted(
            EntryRelation.objects.filter(source=entry).values_list("pk", "predicate", "target_id", "sources")
        ) + sorted(
            EntryRelation.objects.filter(target=entry).values_list("pk", "predicate", "source_id", "sources")
        )
        return (entry.name, entry.aliases, entry.summary, entry.deleted_at), blocks, sources, relations

    original = picture()
    admin = world.client("admin")
    deleted = admin.delete(f"/api/entries/{alice.pk}")
    assert admin.get("/api/entries", {"q": "alice"}).json()["count"] == 0
    assert admin.get(f"/api/entries/{it.pk}").json()["relations"] == []  # the other end is hidden
    response = admin.post("/api/audit/restore", {"events": [deleted.json()["audit_event"]]}, format="json")
    assert response.status_code == 200, response.json()
    assert picture() == original
    assert admin.get("/api/entries", {"q": "alice"}).json()["count"] == 1
    detail = admin.get(f"/api/entries/{alice.pk}").json()
    assert [b["text"] for b in detail["blocks"]] == ["Leads IT.", "Vegetarian."]
    assert [r["id"] for r in detail["relations"]] == [out.pk]
    assert [r["id"] for r in detail["incoming_relations"]] == [back.pk]


def test_a_restore_is_itself_restorable(world):
    entry = make_entry(world.copilot, name="VPN", blocks=["v1"])
    block = entry.created_blocks[0]
    corrected = entries.block_correct(
        actor=ADMIN, entry_id=entry.pk, block_id=block.pk, text="v2", reason="r"
    )
    first = audit_restore(actor=ADMIN, event_ids=[corrected.audit_event.pk])
    assert Memory.objects.get(pk=block.pk).text == "v1"
    audit_restore(actor=ADMIN, event_ids=[first.event.pk])
    memory = Memory.objects.get(pk=block.pk)
    assert memory.text == "v2" and memory.version == 4
    with pytest.raises(RestoreConflict):  # the first restore's result is gone now
        audit_restore(actor=ADMIN, event_ids=[first.event.pk])


def test_restoring_an_entrys_name_sends_its_blocks_back_to_the_embedding_backlog(world):
    from tests.factory import embed_all

    entry = make_entry(world.copilot, name="VPN", blocks=["use client 5.2"])
    renamed = entries.entry_update(actor=ADMIN, entry_id=entry.pk, name="Remote access")
    embed_all()
    audit_restore(actor=ADMIN, event_ids=[renamed.audit_event.pk])
    assert Entry.objects.get(pk=entry.pk).name == "VPN"
    assert Memory.objects.get(entry=entry).embedding_model == ""  # embedded again as "VPN: …"


def test_consecutive_changes_of_one_record_restore_newest_first(world):
    entry = make_entry(world.copilot, name="VPN", blocks=["v1"])
    block = entry.created_blocks[0]
    a = entries.block_correct(actor=ADMIN, entry_id=entry.pk, block_id=block.pk, text="v2", reason="r")
    b = entries.block_correct(actor=ADMIN, entry_id=entry.pk, block_id=block.pk, text="v3", reason="r")
    with pytest.raises(RestoreConflict) as conflict:
        audit_restore(actor=ADMIN, event_ids=[a.audit_event.pk])  # the older alone: v3 is in the way
    assert conflict.value.conflicts[0]["fields"] == ["text"]
    plan = audit_restore(actor=ADMIN, event_ids=[a.audit_event.pk, b.audit_event.pk])
    assert [s.event.pk for s in plan.steps] == [b.audit_event.pk, a.audit_event.pk]
    assert Memory.objects.get(pk=block.pk).text == "v1"
    assert plan.event.revisions.count() == 1  # one record, written once


def test_restoring_a_creation_retires_what_it_created(world):
    entry = make_entry(world.copilot, name="Mistake", blocks=["wrong"])
    added = entries.block_add(actor=ADMIN, entry_id=entry.pk, text="also wrong")
    audit_restore(actor=ADMIN, event_ids=[added.audit_event.pk])
    assert Memory.objects.get(pk=added.pk).status == Memory.INVALIDATED
    create_event = AuditEvent.objects.get(action="entry.created", data__entry=entry.pk)
    audit_restore(actor=ADMIN, event_ids=[create_event.pk])
    assert not Entry.objects.filter(pk=entry.pk).exists()
    assert Entry.all_objects.get(pk=entry.pk).deleted_at is not None
    assert Memory.objects.get(pk=entry.created_blocks[0].pk).status == Memory.INVALIDATED


def test_a_removed_relation_comes_back_with_its_id(world):
    a, b = make_entry(world.copilot, name="A"), make_entry(world.copilot, name="B")
    rel = entries.relation_add(actor=ADMIN, entry_id=a.pk, predicate="uses", target_id=b.pk, sources=EVIDENCE)
    event = entries.relation_remove(actor=ADMIN, entry_id=a.pk, relation_id=rel.pk)
    audit_restore(actor=ADMIN, event_ids=[event.pk])
    again = EntryRelation.objects.get(pk=rel.pk)
    assert (again.predicate, again.target_id, again.sources) == ("uses", b.pk, EVIDENCE)


def test_settings_and_guides_restore_through_the_same_mechanism(world):
    from knowledge.principals import services

    services.setting_set(actor=ADMIN, name="BRAIN_MEMORY_INVALIDATION", value="requeue")
    event = AuditEvent.objects.get(action="settings.changed")
    audit_restore(actor=ADMIN, event_ids=[event.pk])
    assert setting_get("BRAIN_MEMORY_INVALIDATION") == "flag"
    assert Setting.objects.get(name="BRAIN_MEMORY_INVALIDATION").value == "flag"

    guide = guide_update(actor=ADMIN, owner=world.copilot, taxonomy="people; systems")
    guide = guide_update(actor=ADMIN, owner=world.copilot, taxonomy="people; systems; policies")
    audit_restore(actor=ADMIN, event_ids=[guide.audit_event.pk])
    guide = CurationGuide.objects.get(owner=world.copilot)
    assert guide.taxonomy == "people; systems" and guide.version == 3


def test_events_without_before_after_cannot_be_restored(world):
    event = AuditEvent.objects.get(action="agent.created", object_ids=[str(world.copilot.pk)])
    response = world.client("admin").post("/api/audit/restore", {"events": [event.pk]}, format="json")
    assert response.status_code == 400 and "cannot be restored" in str(response.json())
    assert (
        world.client("admin").post("/api/audit/restore", {"events": [999999]}, format="json").status_code
        == 404
    )
    assert world.client("admin").post("/api/audit/restore", {"events": []}, format="json").status_code == 400


def test_memory_revisions_written_by_other_services_restore_too(world):
    """Lifecycle changes elsewhere (approve, reject, edit) carry `memory` revisions with a plain
    snapshot of the row; restore puts the status back."""
    from django.db import transaction

    from knowledge.audit.services import audit_record, snapshot
    from knowledge.memories.rows import memory_row_state

    entry = make_entry(world.copilot, name="VPN", actor=Principal.for_agent(world.copilot), blocks=["queued"])
    memory = Memory.objects.get(pk=entry.created_blocks[0].pk)
    assert memory.status == Memory.QUEUED
    with transaction.atomic():
        before = snapshot(memory)
        memory_row_state(memory, status=Memory.ACTIVE)
        event = audit_record(
            "memory.approved",
            actor=ADMIN,
            object_type="memory",
            object_ids=[memory.pk],
            revisions=[("memory", memory.pk, before, snapshot(memory))],
        )
    audit_restore(actor=ADMIN, event_ids=[event.pk])
    assert Memory.objects.get(pk=memory.pk).status == Memory.QUEUED


def test_audit_api_filters_and_shows_before_after(world, three_changes):
    entry, block, relation, events = three_changes
    admin = world.client("admin")
    listed = admin.get("/api/audit", {"action": "block.corrected"}).json()
    assert [e["id"] for e in listed["results"]] == [events[0]]
    assert listed["results"][0]["restorable"] is True
    assert {e["action"] for e in admin.get("/api/audit", {"action": "entry.*"}).json()["results"]} == {
        "entry.created",
        "entry.updated",
    }
    assert admin.get("/api/audit", {"actor": "adam", "entry": entry.pk}).json()["count"] == 3
    assert admin.get("/api/audit", {"store": "self"}).json()["count"] == 0
    assert admin.get("/api/audit", {"owner": "copilot", "restorable": "1"}).json()["count"] == 5
    assert admin.get("/api/audit", {"dreaming_run": 7}).json()["count"] == 0
    assert admin.get("/api/audit", {"since": "2999-01-01"}).json()["count"] == 0
    assert admin.get("/api/audit", {"dreaming_run": "x"}).status_code == 400
    detail = admin.get(f"/api/audit/{events[0]}").json()
    assert detail["revisions"][0]["before"]["text"] == "Client 5.2.1."
    assert detail["revisions"][0]["after"]["text"] == "Client 5.2.2."


def test_the_restore_preview_says_exactly_what_the_restore_does(client, world):
    """One object touched by several events of a batch is one record; an added block whose
    addition is restored is invalidated (its row stays), and the preview says so; only
    people-facing field names are shown."""
    entry = make_entry(world.copilot, name="VPN client", blocks=["Client 5.2.1."])
    block = entry.created_blocks[0]
    first = entries.block_correct(
        actor=ADMIN, entry_id=entry.pk, block_id=block.pk, text="Client 5.2.2.", reason="a"
    )
    second = entries.block_correct(
        actor=ADMIN, entry_id=entry.pk, block_id=block.pk, text="Client 5.2.3.", reason="b"
    )
    added = entries.block_add(actor=ADMIN, entry_id=entry.pk, text="Reboot after the upgrade.")
    summary = entries.entry_update(actor=ADMIN, entry_id=entry.pk, summary="the VPN client")
    events = [first.audit_event.pk, second.audit_event.pk, added.audit_event.pk, summary.audit_event.pk]

    preview = audit_restore(actor=ADMIN, event_ids=events, preview=True)
    planned = [(o.label, o.kind) for o in preview.outcomes]
    assert len(preview.steps) > len(planned)  # the steps are per event; the records per object
    client.force_login(world.admin)
    page = client.get("/knowledge/audit/restore", {"events": events}).content.decode()
    assert f"Preview: restoring {len(planned)} records" in page
    assert 'data-kind="invalidate"' in page and 'data-kind="remove"' not in page
    for internal in ("owner_id", "superseded_by_id", "entry_id", "status_reason"):
        assert f">{internal}<" not in page

    result = world.client("admin").post("/api/audit/restore", {"events": events}, format="json").json()
    assert [(w["label"], w["kind"]) for w in result["writes"]] == planned
    event = AuditEvent.objects.get(pk=result["audit_event"])
    assert event.counts["records"] == len(planned)
    assert Memory.objects.get(pk=added.pk).status == "invalidated"
    assert Memory.objects.get(pk=block.pk).text == "Client 5.2.1."


def test_a_bulk_approval_is_found_by_its_batch_and_restored_from_the_console_as_one(client, world):
    """The queue's bulk decision names its audit batch; the Audit tab lists that batch alone and
    an admin previews and restores all of it in two clicks, without ticking its events."""
    from memory.lifecycle import review
    from tests.factory import make_queued_memory

    queued = [make_queued_memory(world.copilot, f"Fact {i} about the billing export.") for i in range(3)]
    other = make_queued_memory(world.copilot, "An unrelated fact about the office plants.")
    reviewer = Principal(kind="person", name="rita", role="reviewer")
    review.memory_approve(actor=reviewer, memory_id=other.pk)  # another batch, left alone
    result = review.memory_review_bulk(actor=reviewer, memory_ids=[m.pk for m in queued], action="approve")
    assert sorted(result["done"]) == sorted(m.pk for m in queued)
    batch = result["batch"]

    admin = world.client("admin")
    listed = admin.get("/api/audit", {"batch": batch}).json()
    assert {e["action"] for e in listed["results"]} == {"memory.approved"} and listed["count"] == 3
    assert admin.get("/api/audit", {"batch": "not-a-uuid"}).status_code == 400

    client.force_login(world.admin)
    page = client.get("/knowledge/audit/", {"batch": batch}).content.decode()
    assert 'id="audit-batch"' in page and "3 events" in page
    assert f"/knowledge/audit/restore?batch={batch}" in page
    assert client.get("/knowledge/audit/", {"batch": "nope"}).status_code == 200  # said, not a 500
    preview = client.get("/knowledge/audit/restore", {"batch": batch})
    assert preview.status_code == 200 and b"the whole batch" in preview.content
    assert Memory.objects.filter(pk__in=[m.pk for m in queued], status="active").count() == 3
    events = sorted(int(v) for v in preview.context["event_ids"])
    assert events == sorted(AuditEvent.objects.filter(batch_id=batch).values_list("pk", flat=True))
    done = client.post("/knowledge/audit/restore", {"events": events})
    assert done.status_code == 302
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert {statuses[m.pk] for m in queued} == {"queued"} and statuses[other.pk] == "active"
