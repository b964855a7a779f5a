"""Erasure (issue 60): a person, a memory, a message and a conversation are erased for good
through POST /api/erasures; no read path and no column of the database holds their text after."""

import pytest
from django.db import connection
from django.test import Client

from knowledge.entries import services as entry_services
from knowledge.erasure.services import erasure_apply, erasure_ledger_reapply
from knowledge.materials import services as materials
from knowledge.memories.guard import memory_rows_guard
from knowledge.models import (
    AuditEvent,
    Entry,
    Episode,
    ErasedItem,
    Erasure,
    Memory,
    MemorySource,
    MemoryVersion,
    Message,
    Person,
)
from knowledge.principal import Principal
from tests import factory
from tests.knowledge.erasure.sweep import database_rows_holding, pages_holding, read_paths_holding

TOKEN = "zqxwtoken7781"
ADMIN = Principal(kind="person", name="adam", role="admin")


def _erase(world, body, who="admin"):
    return world.client(who).post("/api/erasures", body, format="json")


def _person_world(world):
    """Alice's content, each kind with the token: a private memory, entry and material, DM
    messages, a message in #general, an episode over the DM, a memory citing her DM only and one
    the distiller wrote in her DM conversation (erased with her), a block Dreaming wrote in a
    shared entry from her DM, and a memory that also rests on Bob's message (kept, back to
    review; its source snapshot of her message goes)."""
    Person.objects.filter(pk=world.alice.pk).update(display_name=f"Alice {TOKEN}-display")
    dm_conv = factory.make_conversation(world.copilot, world.dm_alice)
    general_conv = factory.make_conversation(world.copilot, world.general)
    dm_ids = factory.post_messages(
        world.dm_alice,
        [
            {"speaker": "alice", "text": f"My badge number is {TOKEN}-badge"},
            {"speaker": "copilot", "text": f"Noted your badge {TOKEN}-reply"},
        ],
    )
    general_ids = factory.post_messages(
        world.general,
        [
            {"speaker": "alice", "text": f"The printer code is {TOKEN}-printer"},
            {"speaker": "bob", "text": "The printer is on floor two"},
        ],
    )
    private = factory.make_memory_row(
        world.copilot, f"Alice's badge is {TOKEN}-private", store="private:alice"
    )
    entry = factory.make_entry(
        world.copilot,
        name=f"Alice notes {TOKEN}-entry",
        store="private:alice",
        blocks=[f"block {TOKEN}-block"],
    )
    distilled = factory.make_memory_row(
        world.copilot,
        f"Alice's badge number is {TOKEN}-distilled",
        store="shared",
        sources=[{"kind": "message", "ref": str(dm_ids[0])}],
    )
    supported = factory.make_memory_row(
        world.copilot,
        "The printer lives on floor two",
        store="shared",
        sources=[
            {"kind": "message", "ref": str(general_ids[0])},
            {"kind": "message", "ref": str(general_ids[1])},
        ],
    )
    episode = Episode.objects.create(
        channel=world.dm_alice,
        store="private:alice",
        topic=f"badge {TOKEN}-topic",
        summary=f"Alice gave her badge {TOKEN}-summary",
        start_ts=Message.objects.get(pk=dm_ids[0]).ts,
        end_ts=Message.objects.get(pk=dm_ids[1]).ts,
    )
    episode.evidence.set(dm_ids)
    Message.objects.filter(pk__in=dm_ids).update(episode=episode)
    distiller = factory.make_memory(
        world.copilot,
        f"Alice keeps her badge in {TOKEN}-distiller",
        store="private:alice",
        conversation=dm_conv,
        route="distiller",
        author_kind="distiller",
        author_name="distiller",
    )
    shared_entry = factory.make_entry(world.copilot, name="Badges", store="shared")
    dreamed = entry_services.block_add(
        actor=factory.SYSTEM,
        entry_id=shared_entry.pk,
        text=f"Badge numbers look like {TOKEN}-dreamed",
        sources=[{"kind": "message", "ref": str(dm_ids[0])}],
        route="dreaming",
    )
    material = materials.material_paste(
        actor=factory.SYSTEM,
        owner=world.copilot,
        store="private:alice",
        title=f"Alice's badge form {TOKEN}-material",
        text=f"Badge holder: {TOKEN}-form",
    )
    return {
        "material": material,
        "distiller": distiller,
        "dreamed": dreamed,
        "conversations": [dm_conv, general_conv],
        "dm": dm_ids,
        "general": general_ids,
        "private": private,
        "entry": entry,
        "distilled": distilled,
        "supported": supported,
        "episode": episode,
    }


def planted_ids(planted) -> dict:
    memories = [planted[k].pk for k in ("private", "distilled", "supported", "distiller", "dreamed")]
    return {
        "memory": memories,
        "entry": [planted["entry"].pk, planted["material"].entry.pk, planted["dreamed"].entry_id],
        "material": [planted["material"].pk],
        "message": [*planted["dm"], *planted["general"]],
        "conversation": [c.pk for c in planted["conversations"]],
        "episode": [planted["episode"].pk],
    }


def test_forgetting_a_person_leaves_their_content_on_no_read_path_and_in_no_column(world):
    planted = _person_world(world)
    ids = planted_ids(planted)
    assert database_rows_holding(TOKEN), "the sweep's own premise: the token was planted"
    before = read_paths_holding(world, TOKEN, conversations=planted["conversations"], ids=ids)
    pages = pages_holding(world, TOKEN, ids)
    assert "export" in before and len(before) > 10, before
    for page in (
        "/search/?q=",
        "/memories/?q=",
        "/knowledge/entries/",
        f"/knowledge/materials/{ids['material'][0]}/",
    ):
        assert any(url.startswith(page) for url in pages), (page, pages)

    response = _erase(world, {"person": "alice", "reason": "she asked to be forgotten"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert {planted["distilled"].pk, planted["dreamed"].pk} <= set(body["derived_memories"])
    assert planted["distiller"].pk in body["memories"]
    assert body["requeued_memories"] == [planted["supported"].pk]
    assert set(body["messages"]) == {*planted["dm"], planted["general"][0]}
    assert body["materials"] == ids["material"]
    after = read_paths_holding(
        world, TOKEN, conversations=planted["conversations"], memory_ids=ids["memory"], ids=ids
    )
    assert after == []
    assert pages_holding(world, TOKEN, ids) == []
    assert database_rows_holding(TOKEN) == []


def test_forgetting_a_person_keeps_what_others_said_and_sends_what_rested_on_them_to_review(world):
    planted = _person_world(world)
    _erase(world, {"person": "alice", "reason": "left the company"})

    assert Message.objects.filter(pk=planted["general"][1]).exists()
    assert not Message.objects.filter(pk__in=planted["dm"]).exists()
    assert not Episode.objects.filter(pk=planted["episode"].pk).exists()
    supported = Memory.objects.get(pk=planted["supported"].pk)
    assert (supported.status, supported.queue_reason, supported.stale) == ("queued", "requeued", True)
    assert supported.text == "The printer lives on floor two"
    private = Memory.objects.get(pk=planted["private"].pk)
    assert (private.status, private.text, private.key, private.value, private.embedding) == (
        "erased",
        "",
        "",
        None,
        None,
    )
    assert not MemoryVersion.objects.filter(memory=private).exclude(text="").exists()


def test_an_erasure_is_audited_by_ids_counts_and_reason_and_kept_in_the_ledger(world):
    planted = _person_world(world)
    _erase(world, {"person": "alice", "reason": "GDPR request 17"})

    erasure = Erasure.objects.get()
    assert (erasure.kind, erasure.target, erasure.reason, erasure.actor_name) == (
        "person",
        "alice",
        "GDPR request 17",
        "adam",
    )
    event = AuditEvent.objects.get(action="erasure.applied")
    assert event.reason == "GDPR request 17" and event.counts["messages"] == 3
    assert event.data["erasure"] == erasure.pk
    kinds = set(ErasedItem.objects.values_list("kind", "ref"))
    assert ("memory", str(planted["private"].pk)) in kinds and ("message", str(planted["dm"][0])) in kinds
    assert all(
        len(h) == 64 for h in ErasedItem.objects.values_list("content_hash", flat=True).exclude(kind="memory")
    )


def test_a_dry_run_previews_exactly_what_goes_and_writes_nothing(world):
    planted = _person_world(world)
    before = database_rows_holding(TOKEN)

    preview = _erase(world, {"person": "alice", "dry_run": True})

    assert preview.status_code == 200, preview.content
    body = preview.json()
    assert body["dry_run"] is True and "erasure" not in body
    assert body["counts"]["messages"] == 3 and body["counts"]["episodes"] == 1
    assert body["counts"]["derived_memories"] == 2 and body["counts"]["requeued_memories"] == 1
    assert database_rows_holding(TOKEN) == before
    assert not Erasure.objects.exists()
    done = _erase(world, {"person": "alice", "reason": "asked"}).json()
    assert {k: v for k, v in done.items() if k not in ("dry_run", "erasure", "reason", "created_at")} == {
        k: v for k, v in body.items() if k != "dry_run"
    }
    assert planted


def test_erasing_one_memory_takes_its_text_from_versions_sources_and_the_audit_trail(world):
    conv = factory.make_conversation(world.copilot, world.general)
    memory = factory.make_memory(world.copilot, f"The vault code is {TOKEN}-vault", store="shared")
    factory.make_memory_row(
        world.copilot,
        "The vault is in the basement",
        sources=[{"kind": "memory", "ref": str(memory.pk)}],
        reason="derived",
    )
    assert database_rows_holding(TOKEN)
    assert f"/memories/{memory.pk}/" in pages_holding(world, TOKEN, {"memory": [memory.pk]})

    response = _erase(world, {"memory": memory.pk, "reason": "a password was pasted"})

    assert response.status_code == 201, response.content
    assert read_paths_holding(world, TOKEN, conversations=[conv], memory_ids=[memory.pk]) == []
    assert pages_holding(world, TOKEN, {"memory": [memory.pk]}) == []
    assert database_rows_holding(TOKEN) == []
    assert (
        not MemorySource.objects.filter(kind="memory", ref=str(memory.pk)).exclude(state="deleted").exists()
    )


def test_erasing_a_message_and_a_conversation(world):
    conv = factory.make_conversation(world.copilot, world.support)
    ids = factory.post_messages(world.support, [{"speaker": "bob", "text": f"secret {TOKEN}-one"}])
    other = factory.post_messages(world.general, [{"speaker": "bob", "text": f"secret {TOKEN}-two"}])
    distilled = factory.make_memory(
        world.copilot, f"Bob's secret is {TOKEN}-distilled", store="channel:support", conversation=conv
    )
    seen = {"message": ids + other, "conversation": [conv.pk], "memory": [distilled.pk]}
    assert f"/recall/browse/conversation/{conv.pk}" in pages_holding(world, TOKEN, seen)

    assert _erase(world, {"message": other[0], "reason": "pasted a key"}).status_code == 201
    assert _erase(world, {"conversation": conv.pk, "reason": "wrong channel"}).status_code == 201

    assert not Message.objects.filter(pk__in=ids + other).exists()
    assert Memory.objects.get(pk=distilled.pk).status == "erased"
    assert read_paths_holding(world, TOKEN, conversations=[conv], ids=seen) == []
    assert pages_holding(world, TOKEN, seen) == []
    assert database_rows_holding(TOKEN) == []


@pytest.mark.parametrize(
    "body, status",
    [
        ({"memory": 10**9, "reason": "x"}, 404),
        ({"message": 10**9, "reason": "x"}, 404),
        ({"conversation": 10**9, "reason": "x"}, 404),
        ({"person": "nobody-here", "reason": "x"}, 404),
        ({"person": "alice"}, 400),  # no reason
        ({"person": "alice", "memory": 1, "reason": "x"}, 400),  # two targets
        ({"reason": "x"}, 400),
        ({"person": "alice", "reason": "x", "wipe": True}, 400),
    ],
)
def test_bad_input_is_a_clear_json_error_and_changes_nothing(world, body, status):
    _person_world(world)
    before = database_rows_holding(TOKEN)

    response = _erase(world, body)

    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    assert database_rows_holding(TOKEN) == before and not Erasure.objects.exists()


@pytest.mark.parametrize("who", ["copilot", "reviewer", "integration"])
def test_only_an_admin_may_erase(world, who):
    memory = factory.make_memory(world.copilot, f"kept {TOKEN}", store="shared")

    response = _erase(world, {"memory": memory.pk, "reason": "x"}, who=who)

    assert response.status_code == 403, response.content
    assert Memory.objects.get(pk=memory.pk).text == f"kept {TOKEN}"


def test_erasing_twice_is_a_conflict_that_says_so(world):
    memory = factory.make_memory(world.copilot, f"once {TOKEN}", store="shared")
    _person_world(world)
    assert _erase(world, {"memory": memory.pk, "reason": "x"}).status_code == 201
    assert _erase(world, {"person": "alice", "reason": "x"}).status_code == 201

    again = _erase(world, {"memory": memory.pk, "reason": "x"})
    person_again = _erase(world, {"person": "alice", "reason": "x"})

    assert again.status_code == 409 and "erased already" in again.json()["error"]
    assert person_again.status_code == 409 and "Nothing of person alice" in person_again.json()["error"]
    assert Erasure.objects.count() == 2


def test_the_ledger_takes_again_what_comes_back(world):
    planted = _person_world(world)
    erasure_apply(actor=ADMIN, kind="person", ref="alice", reason="asked")
    # What an old backup's restore would bring back: the row with its text again (a restore
    # writes rows below the one writer's guard, as the backup's own loading does).
    with memory_rows_guard(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE knowledge_memory SET text = %s, status = 'active' WHERE id = %s",
            [f"back {TOKEN}", planted["private"].pk],
        )

    taken = erasure_ledger_reapply(actor=ADMIN)

    assert taken["memories"] == 1
    assert database_rows_holding(TOKEN) == []
    assert not any(erasure_ledger_reapply(actor=ADMIN).values())


def test_the_erase_command_previews_then_erases_a_person(world):
    from io import StringIO

    from django.core.management import CommandError, call_command

    planted = _person_world(world)
    preview = StringIO()
    call_command("erase", "--person", "alice", "--dry-run", stdout=preview)
    assert preview.getvalue().startswith("Would erase person alice: ") and "3 messages" in preview.getvalue()
    assert database_rows_holding(TOKEN)
    with pytest.raises(CommandError, match="reason"):
        call_command("erase", "--person", "alice")

    done = StringIO()
    call_command("erase", "--person", "alice", "--reason", "asked", stdout=done)

    assert done.getvalue().startswith("Erased (ledger entry ")
    assert database_rows_holding(TOKEN) == []
    with pytest.raises(CommandError, match="Nothing of person alice"):
        call_command("erase", "--person", "alice", "--reason", "again")
    assert planted


def test_a_restore_preview_lists_an_erased_memory_as_erased_and_restores_the_rest(world):
    kept = factory.make_memory(world.copilot, "Lunch is at noon", store="shared")
    gone = factory.make_memory(world.copilot, f"The safe opens with {TOKEN}", store="shared")
    for memory in (kept, gone):
        world.client("copilot").delete(f"/api/memory/{memory.pk}")
    events = list(
        AuditEvent.objects.filter(action="memory.revoked").order_by("pk").values_list("pk", flat=True)
    )
    erasure_apply(actor=ADMIN, kind="memory", ref=str(gone.pk), reason="a secret")

    preview = world.client("admin").post(
        "/api/audit/restore", {"events": events, "preview": True}, format="json"
    )

    assert preview.status_code == 200, preview.content
    assert preview.json()["erased"] == [
        {
            "object_type": "memory",
            "object_id": str(gone.pk),
            "label": f"memory {gone.pk}: erased, cannot be restored",
        }
    ]
    assert [w["object_id"] for w in preview.json()["writes"]] == [str(kept.pk)]
    console = Client()
    console.force_login(world.admin)
    page = console.get("/knowledge/audit/restore", {"events": events})
    assert f"memory {gone.pk}: erased, cannot be restored" in page.content.decode()
    done = world.client("admin").post("/api/audit/restore", {"events": events}, format="json")
    assert done.status_code == 200, done.content
    assert Memory.objects.get(pk=kept.pk).status == "active"
    assert Memory.objects.get(pk=gone.pk).status == "erased"
    assert database_rows_holding(TOKEN) == []


def test_erasing_an_entry_takes_its_name_summary_and_blocks(world):
    conv = factory.make_conversation(world.copilot, world.general)
    entry = factory.make_entry(
        world.copilot,
        name=f"Vault runbook {TOKEN}-name",
        summary=f"How to open it {TOKEN}-summary",
        blocks=[f"The combination is {TOKEN}-block", "Turn left twice"],
    )
    assert database_rows_holding(TOKEN)

    response = _erase(world, {"entry": entry.pk, "reason": "a secret in a runbook"})

    assert response.status_code == 201, response.content
    assert response.json()["counts"]["entries"] == 1 and response.json()["counts"]["memories"] == 2
    assert read_paths_holding(world, TOKEN, conversations=[conv]) == []
    assert world.client("admin").get(f"/api/entries/{entry.pk}").content.decode().lower().count(TOKEN) == 0
    assert database_rows_holding(TOKEN) == []
    again = _erase(world, {"entry": entry.pk, "reason": "again"})
    assert again.status_code == 409, again.content


def test_an_agent_import_of_an_older_export_does_not_bring_an_erased_memory_back(world):
    """An export taken before the erasure, imported again: the erased memory's content is in the
    ledger (its hash), so the import leaves it out and says so; the rest comes in."""
    import io

    from knowledge.portability.services import agent_export, agent_import

    kept = factory.make_memory(world.scribe, "The office opens at 8", store="self")
    secret = factory.make_memory(world.scribe, f"The safe code is {TOKEN}", store="self")
    entry = factory.make_entry(
        world.scribe, name=f"Safe {TOKEN}-entry", store="self", summary="where it is", blocks=["behind it"]
    )
    factory.make_entry(world.scribe, name="Office", store="self", summary="where it is")
    old_export = "".join(agent_export(actor=ADMIN, agent=world.scribe))
    erasure_apply(actor=ADMIN, kind="memory", ref=str(secret.pk), reason="pasted by mistake")
    erasure_apply(actor=ADMIN, kind="entry", ref=str(entry.pk), reason="pasted by mistake")
    result = agent_import(actor=ADMIN, lines=io.StringIO(old_export), as_name="scribe-restored")
    assert result["erased"] == 3  # the memory, the entry and its block
    assert database_rows_holding(TOKEN) == []
    assert Memory.objects.filter(owner__name="scribe-restored", text=kept.text).exists()
    assert list(Entry.objects.filter(owner__name="scribe-restored").values_list("name", flat=True)) == [
        "Office"
    ]


def test_erasing_a_memory_clears_the_reasons_the_audit_trail_gave_about_it(world):
    memory = factory.make_memory(world.copilot, f"The alarm code is {TOKEN}", store="shared")
    other = factory.make_memory(world.copilot, "The alarm rings at seven", store="shared")
    reasons = {memory.pk: f"not {TOKEN} any more", other.pk: "it rings at eight now"}
    for pk, reason in reasons.items():
        done = world.client("copilot").delete(f"/api/memory/{pk}", QUERY_STRING=f"reason={reason}")
        assert done.status_code == 200, done.content
    assert "knowledge_auditevent.reason" in database_rows_holding(TOKEN)

    response = _erase(world, {"memory": memory.pk, "reason": "a code was pasted"})

    assert response.status_code == 201, response.content
    assert database_rows_holding(TOKEN) == []
    retired = AuditEvent.objects.filter(action="memory.revoked").order_by("pk")
    assert [(e.object_ids, e.reason) for e in retired] == [
        ([str(memory.pk)], ""),  # the event stays, by its ids; its words go
        ([str(other.pk)], "it rings at eight now"),
    ]
    erasure_ledger_reapply(actor=ADMIN)  # as after a restore: the erasure's own reason stays
    assert AuditEvent.objects.get(action="erasure.applied").reason == "a code was pasted"
