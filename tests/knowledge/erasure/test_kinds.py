"""Erasure of the other kinds (issue 60): a channel, a material (its original and what was
learned from it) and an agent's store — each through POST /api/erasures, with what depends on
it following; no read path and no column holds their text after."""

import pytest
from django.utils import timezone

from knowledge.materials import services as materials
from knowledge.materials.storage import original_exists
from knowledge.models import Conversation, Entry, Material, Memory, Message
from memory.models import ConsolidationGroup, ConsolidationItem, ConsolidationPlan
from tests import factory
from tests.knowledge.erasure.sweep import database_rows_holding, pages_holding, read_paths_holding
from tests.knowledge.erasure.test_erasure import TOKEN


def _erase(world, body, who="admin"):
    return world.client(who).post("/api/erasures", body, format="json")


def test_erasing_a_channel_takes_its_messages_conversations_and_channel_store(world):
    conv = factory.make_conversation(world.copilot, world.support)
    ids = factory.post_messages(
        world.support,
        [
            {"speaker": "bob", "text": f"The router password is {TOKEN}-router"},
            {"speaker": "copilot", "text": f"Saved {TOKEN}-reply"},
        ],
    )
    elsewhere = factory.post_messages(world.general, [{"speaker": "bob", "text": "Routers live in rack 4"}])
    own = factory.make_memory_row(world.copilot, f"Router password {TOKEN}-own", store="channel:support")
    distilled = factory.make_memory_row(
        world.copilot, f"Bob set the router to {TOKEN}-distilled", store="shared", conversation=conv
    )
    supported = factory.make_memory_row(
        world.copilot,
        "Routers are in rack 4",
        store="shared",
        sources=[{"kind": "message", "ref": str(ids[0])}, {"kind": "message", "ref": str(elsewhere[0])}],
    )
    assert read_paths_holding(world, TOKEN, conversations=[conv])

    response = _erase(world, {"channel": "support", "reason": "a password was pasted"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body["messages"]) == set(ids) and body["conversations"] == [conv.pk]
    assert set(body["memories"]) == {own.pk, distilled.pk} and body["derived_memories"] == [distilled.pk]
    assert body["requeued_memories"] == [supported.pk]
    assert (
        Message.objects.filter(pk=elsewhere[0]).exists() and Conversation.objects.filter(pk=conv.pk).exists()
    )
    assert Memory.objects.get(pk=supported.pk).stale
    ids_seen = [own.pk, distilled.pk, supported.pk]
    assert read_paths_holding(world, TOKEN, conversations=[conv], memory_ids=ids_seen) == []
    assert database_rows_holding(TOKEN) == []
    assert _erase(world, {"channel": "support", "reason": "again"}).status_code == 409


def test_erasing_a_material_takes_its_original_and_what_was_learned_from_it(
    world, django_capture_on_commit_callbacks
):
    conv = factory.make_conversation(world.copilot, world.general)
    material = materials.material_paste(
        actor=factory.SYSTEM,
        owner=world.copilot,
        store="shared",
        title=f"Vault manual {TOKEN}-title",
        text=f"The vault opens with {TOKEN}-section.\n\nIt closes itself at six.",
    )
    paths = list(material.versions.values_list("path", flat=True))
    blocks = list(Memory.objects.filter(entry=material.entry).values_list("pk", flat=True))
    cited = factory.make_memory_row(
        world.copilot,
        f"The vault code is {TOKEN}-cited",
        store="shared",
        sources=[{"kind": "material", "ref": f"{material.pk}#1"}],
    )
    said = factory.post_messages(world.general, [{"speaker": "bob", "text": "The vault closes at six"}])
    kept = factory.make_memory_row(
        world.copilot,
        "The vault closes at six",
        store="shared",
        sources=[{"kind": "material", "ref": str(material.pk)}, {"kind": "message", "ref": str(said[0])}],
    )
    assert paths and all(original_exists(p) for p in paths) and blocks
    assert database_rows_holding(TOKEN)
    seen = {"material": [material.pk], "entry": [material.entry.pk], "memory": [*blocks, cited.pk]}
    assert f"/knowledge/materials/{material.pk}/" in pages_holding(world, TOKEN, seen)

    preview = _erase(world, {"material": material.pk, "dry_run": True}).json()
    with django_capture_on_commit_callbacks(execute=True):
        response = _erase(world, {"material": material.pk, "reason": "a secret in a manual"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert {k: v for k, v in body.items() if k not in ("dry_run", "erasure", "reason", "created_at")} == {
        k: v for k, v in preview.items() if k != "dry_run"
    }
    assert body["materials"] == [material.pk] and body["entries"] == [material.entry.pk]
    assert set(body["memories"]) == {*blocks, cited.pk} and body["requeued_memories"] == [kept.pk]
    assert not Material.objects.filter(pk=material.pk).exists()
    assert not any(original_exists(p) for p in paths)
    assert world.client("admin").get(f"/api/materials/{material.pk}").status_code == 404
    assert not Entry.objects.filter(pk=material.entry.pk).exists()  # the live manager: gone
    assert (
        read_paths_holding(world, TOKEN, conversations=[conv], memory_ids=[*blocks, cited.pk], ids=seen) == []
    )
    assert pages_holding(world, TOKEN, seen) == []
    assert database_rows_holding(TOKEN) == []
    assert _erase(world, {"material": material.pk, "reason": "again"}).status_code == 404


def test_erasing_an_agents_store_takes_that_agents_memories_and_entries_there_only(world):
    conv = factory.make_conversation(world.copilot, world.general)
    mine = factory.make_memory(world.copilot, f"My own note {TOKEN}-self", store="self")
    entry = factory.make_entry(
        world.copilot, name=f"Own runbook {TOKEN}-entry", store="self", blocks=[f"step {TOKEN}-block"]
    )
    other = factory.make_memory(world.scribe, "The scribe keeps its notes", store="self")
    shared = factory.make_memory(world.copilot, "Lunch is at noon", store="shared")

    response = _erase(world, {"store": "self", "agent": "copilot", "reason": "reset the agent"})

    assert response.status_code == 201, response.content
    assert response.json()["entries"] == [entry.pk] and mine.pk in response.json()["memories"]
    assert Memory.objects.get(pk=other.pk).status == "active"
    assert Memory.objects.get(pk=shared.pk).status == "active"
    assert read_paths_holding(world, TOKEN, conversations=[conv], memory_ids=[mine.pk]) == []
    assert database_rows_holding(TOKEN) == []


def _plan(world, state, target, memories, text):
    plan = ConsolidationPlan.objects.create(
        state=state, mode="propose", created_by="tests", created_at=timezone.now()
    )
    group = ConsolidationGroup.objects.create(
        plan=plan, kind="duplicate", owner=world.copilot, store="shared", target=target, merged_text=text
    )
    for memory in memories:
        ConsolidationItem.objects.create(
            plan=plan, group=group, memory=memory, role="fold", before={"memory": {"text": memory.text}}
        )
    return plan, group


def test_consolidation_plans_naming_an_erased_memory_drop_it(world):
    a = factory.make_memory(world.copilot, f"The gate code is {TOKEN}-a", store="shared")
    b = factory.make_memory(world.copilot, "The gate is on the north side", store="shared")
    c = factory.make_memory(world.copilot, "The gate closes at ten", store="shared")
    proposed, dropped = _plan(world, "proposed", b, [a, b], f"Gate {TOKEN}-proposed, north side")
    _, untouched = _plan(world, "discarded", c, [c], "The gate closes at ten")
    applied, history = _plan(world, "applied", b, [a, b], f"Gate {TOKEN}-applied")

    assert _erase(world, {"memory": a.pk, "reason": "a code"}).status_code == 201

    assert not ConsolidationGroup.objects.filter(pk=dropped.pk).exists()
    assert not ConsolidationItem.objects.filter(plan=proposed).exists()
    history.refresh_from_db()
    assert history.merged_text == "" and ConsolidationItem.objects.get(plan=applied, memory=b).before
    assert ConsolidationItem.objects.get(plan=applied, memory=a).before == {"erased": True}
    assert ConsolidationGroup.objects.get(pk=untouched.pk).merged_text == "The gate closes at ten"
    assert database_rows_holding(TOKEN) == []


@pytest.mark.parametrize(
    "body, status",
    [
        ({"channel": "no-such-channel", "reason": "x"}, 404),
        ({"material": 10**9, "reason": "x"}, 404),
        ({"store": "self", "agent": "nobody", "reason": "x"}, 404),
        ({"store": "self", "reason": "x"}, 400),  # whose store?
        ({"memory": 1, "agent": "copilot", "reason": "x"}, 400),
    ],
)
def test_bad_input_for_the_other_kinds_is_a_clear_json_error(world, body, status):
    response = _erase(world, body)

    assert response.status_code == status, response.content
    assert response.json()["error"]


def test_a_restore_preview_lists_an_erased_entry_and_its_blocks_as_erased_and_restores_the_rest(world):
    from knowledge.entries.services import entry_delete
    from knowledge.models import AuditEvent

    kept = factory.make_entry(world.copilot, name="Parking", blocks=["Level -2"])
    gone = factory.make_entry(world.copilot, name=f"Safe {TOKEN}-name", blocks=[f"code {TOKEN}-block"])
    for entry in (kept, gone):
        entry_delete(actor=factory.SYSTEM, entry_id=entry.pk, reason="tidy")
    events = list(AuditEvent.objects.filter(action="entry.deleted").values_list("pk", flat=True))
    assert _erase(world, {"entry": gone.pk, "reason": "a code"}).status_code == 201

    preview = world.client("admin").post(
        "/api/audit/restore", {"events": events, "preview": True}, format="json"
    )

    assert preview.status_code == 200, preview.content
    erased = {(e["object_type"], e["object_id"]) for e in preview.json()["erased"]}
    assert ("entry", str(gone.pk)) in erased and ("entry", str(kept.pk)) not in erased
    done = world.client("admin").post("/api/audit/restore", {"events": events}, format="json")
    assert done.status_code == 200, done.content
    assert Entry.objects.filter(pk=kept.pk).exists() and not Entry.objects.filter(pk=gone.pk).exists()
    assert database_rows_holding(TOKEN) == []


def test_an_episode_with_an_erased_message_goes_and_the_rest_of_its_messages_stay_unepisoded(world):
    from knowledge.models import Episode

    ids = factory.post_messages(
        world.general,
        [
            {"speaker": "bob", "text": f"the door code is {TOKEN}-door"},
            {"speaker": "bob", "text": "door fixed"},
        ],
    )
    said = Message.objects.filter(pk__in=ids).order_by("ts")
    episode = Episode.objects.create(
        channel=world.general,
        store="shared",
        topic="door",
        summary=f"Bob shared {TOKEN}-summary",
        start_ts=said[0].ts,
        end_ts=said[1].ts,
    )
    episode.evidence.set(ids)
    Message.objects.filter(pk__in=ids).update(episode=episode)

    body = _erase(world, {"message": ids[0], "reason": "a code"}).json()

    assert body["episodes"] == [episode.pk] and not Episode.objects.filter(pk=episode.pk).exists()
    assert Message.objects.get(pk=ids[1]).episode_id is None
    assert database_rows_holding(TOKEN) == []


def test_the_ledger_deletes_an_erased_materials_original_left_in_storage(
    world, django_capture_on_commit_callbacks
):
    from django.core.files.base import ContentFile

    from knowledge.erasure.services import erasure_ledger_reapply
    from knowledge.materials.storage import material_storage
    from tests.knowledge.erasure.test_erasure import ADMIN

    material = materials.material_paste(
        actor=factory.SYSTEM, owner=world.copilot, store="shared", title="Manual", text=f"code {TOKEN}"
    )
    other = materials.material_paste(
        actor=factory.SYSTEM, owner=world.copilot, store="shared", title="Other", text="kept"
    )
    kept = list(other.versions.values_list("path", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        assert _erase(world, {"material": material.pk, "reason": "x"}).status_code == 201
    # What a crash before the file deletes, or a restored archive's files, would leave.
    left = material_storage().save(f"{material.pk}/v1-left", ContentFile(TOKEN.encode()))

    with django_capture_on_commit_callbacks(execute=True):
        erasure_ledger_reapply(actor=ADMIN)

    assert not original_exists(left)
    assert all(original_exists(p) for p in kept)
