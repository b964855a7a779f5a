"""Provenance: fingerprints, the source registry, the check and its four modes."""

import pytest
from django.db import transaction

from knowledge.memories.activation import memory_row_create
from knowledge.models import AuditEvent, Entry, Memory, MemorySource
from knowledge.settings_store import setting_get
from memory.provenance.services import provenance_check
from tests.factory import SYSTEM, set_state

TICKET = {
    "title": "VPN drops",
    "description": "Client 5.1 drops",
    "status": "open",
    "resolution": "",
    "category": "network",
    "assignee": "bob",
}


def write(world, text="VPN-4012 is fixed by client 5.2.1", sources=(), status=Memory.ACTIVE, owner=None):
    with transaction.atomic():
        return memory_row_create(
            owner=owner or world.copilot,
            store="shared",
            text=text,
            author_kind="agent",
            author_name="copilot",
            status=status,
            sources=list(sources),
        )


def push(world, kind, ref, fields):
    return world.client("integration").put(f"/api/sources/{kind}/{ref}", fields, format="json")


def check(world):
    response = world.client("reviewer").post("/api/memory-provenance/check")
    assert response.status_code == 200
    return response.json()


def set_mode(mode):
    from knowledge.principals import services

    services.setting_set(actor=SYSTEM, name="BRAIN_MEMORY_INVALIDATION", value=mode)
    assert setting_get("BRAIN_MEMORY_INVALIDATION") == mode


@pytest.fixture
def ticket_memory(world):
    assert push(world, "ticket", "INC-12", TICKET).status_code == 200
    return write(world, sources=[{"kind": "ticket", "ref": "INC-12"}])


def test_it_records_the_fingerprint_of_only_the_fields_that_matter(world, ticket_memory):
    source = ticket_memory.sources.get()
    assert source.fingerprint
    assert source.snapshot == {
        k: TICKET[k] for k in ("title", "description", "status", "resolution", "category")
    }


def test_it_stays_unchanged_when_the_assignee_changes(world, ticket_memory):
    push(world, "ticket", "INC-12", {**TICKET, "assignee": "carol"})
    counts = check(world)
    assert counts["stale"] == 0
    assert counts["unchanged"] == 1
    ticket_memory.refresh_from_db()
    assert not ticket_memory.stale


def test_it_flags_when_the_resolution_changes_and_says_which_field(world, ticket_memory):
    push(world, "ticket", "INC-12", {**TICKET, "resolution": "upgrade to 5.2.2"})
    counts = check(world)
    assert (counts["stale"], counts["requeued"], counts["invalidated"]) == (1, 0, 0)
    ticket_memory.refresh_from_db()
    assert ticket_memory.stale and ticket_memory.status == Memory.ACTIVE
    assert ticket_memory.stale_reason == "re-check: its source ticket:INC-12 changed"
    view = world.client("reviewer").get(f"/api/memory-provenance/{ticket_memory.pk}").json()
    assert view["sources"][0]["state"] == "changed"
    assert view["sources"][0]["changes"] == [
        {"field": "resolution", "before": "", "after": "upgrade to 5.2.2"}
    ]
    assert view["sources"][0]["checked_at"]
    stale = world.client("reviewer").get("/api/memory-provenance/stale").json()
    assert [m["id"] for m in stale["results"]] == [ticket_memory.pk]
    event = AuditEvent.objects.get(action="memory.stale")
    assert event.object_ids == [str(ticket_memory.pk)]
    assert "VPN-4012" not in str(event.__dict__)


def test_checking_twice_writes_no_second_event(world, ticket_memory):
    push(world, "ticket", "INC-12", {**TICKET, "status": "closed"})
    check(world)
    again = check(world)
    assert again["stale"] == 0
    assert AuditEvent.objects.filter(action="memory.stale").count() == 1
    assert AuditEvent.objects.filter(action="memory.provenance.check").count() == 1


def test_requeue_mode_sends_it_back_to_review_with_the_reason(world, ticket_memory):
    set_mode("requeue")
    push(world, "ticket", "INC-12", {**TICKET, "resolution": "wontfix"})
    assert check(world)["requeued"] == 1
    ticket_memory.refresh_from_db()
    assert ticket_memory.status == Memory.QUEUED
    assert ticket_memory.queue_reason == "requeued"
    assert ticket_memory.status_reason == "re-check: its source ticket:INC-12 changed"
    assert check(world)["requeued"] == 0
    assert AuditEvent.objects.filter(action="memory.requeued").count() == 1


def test_invalidate_mode_retires_it_and_keeps_the_row(world, ticket_memory):
    set_mode("invalidate")
    push(world, "ticket", "INC-12", {**TICKET, "title": "VPN drops on 5.2"})
    assert check(world)["invalidated"] == 1
    ticket_memory.refresh_from_db()
    assert ticket_memory.status == Memory.INVALIDATED
    assert ticket_memory.valid_to is not None


def test_off_mode_checks_nothing(world, ticket_memory):
    set_mode("off")
    push(world, "ticket", "INC-12", {**TICKET, "resolution": "x"})
    assert check(world)["checked"] == 0
    ticket_memory.refresh_from_db()
    assert not ticket_memory.stale


def test_deleting_a_source_makes_its_dependants_stale(world, ticket_memory):
    assert world.client("integration").delete("/api/sources/ticket/INC-12").status_code == 200
    check(world)
    ticket_memory.refresh_from_db()
    assert ticket_memory.stale
    assert ticket_memory.stale_reason == "re-check: its source ticket:INC-12 was deleted"


def test_memories_without_sources_are_never_touched(world, ticket_memory):
    plain = write(world, text="no sources")
    set_mode("invalidate")
    push(world, "ticket", "INC-12", {**TICKET, "resolution": "x"})
    check(world)
    plain.refresh_from_db()
    assert (plain.status, plain.stale) == (Memory.ACTIVE, False)


def test_an_untracked_source_gets_its_baseline_on_first_push(world):
    memory = write(world, sources=[{"kind": "kb", "ref": "KB-7"}])
    assert memory.sources.get().state == "untracked"
    push(world, "kb", "KB-7", {"text": "Install 5.2.1", "resolution": "fixed"})
    assert check(world)["stale"] == 0
    source = memory.sources.get()
    assert source.state == "unchanged" and source.fingerprint
    push(world, "kb", "KB-7", {"text": "Install 5.2.2", "resolution": "fixed"})
    assert check(world)["stale"] == 1


def test_inline_state_is_recorded_and_becomes_the_baseline(world):
    memory = write(
        world, sources=[{"kind": "record", "ref": "crm/account/42", "state": {"plan": "gold", "seats": 10}}]
    )
    assert memory.sources.get().fingerprint
    push(world, "record", "crm/account/42", {"plan": "gold", "seats": 10})
    assert check(world)["stale"] == 0
    push(world, "record", "crm/account/42", {"plan": "gold", "seats": 12})
    assert check(world)["stale"] == 1


def test_retiring_a_cited_memory_makes_derived_memories_stale_transitively(world):
    base = write(world, text="base fact")
    derived = write(world, text="derived", sources=[{"kind": "memory", "ref": str(base.pk)}])
    derived2 = write(world, text="derived twice", sources=[{"kind": "memory", "ref": str(derived.pk)}])
    set_mode("invalidate")
    set_state([base.pk], status=Memory.REJECTED)
    counts = check(world)
    assert counts["invalidated"] == 2
    derived.refresh_from_db()
    derived2.refresh_from_db()
    assert derived.status == derived2.status == Memory.INVALIDATED
    assert derived2.stale_reason == f"re-check: its source memory:{derived.pk} changed"


def test_editing_a_cited_entry_makes_dependants_stale(world):
    entry = Entry.objects.create(name="VPN", owner=world.copilot, store="shared")
    with transaction.atomic():
        block = memory_row_create(
            owner=world.copilot,
            store="shared",
            text="Use client 5.2.1",
            entry=entry,
            position=0,
            author_kind="person",
            author_name="adam",
            status=Memory.ACTIVE,
        )
    memory = write(world, sources=[{"kind": "entry", "ref": str(entry.pk)}])
    assert check(world)["stale"] == 0
    from knowledge.memories.rows import memory_row_revise

    with transaction.atomic():
        memory_row_revise(memory=block, text="Use client 5.2.2", author_kind="person", author_name="adam")
    assert check(world)["stale"] == 1
    view = world.client("admin").get(f"/api/memory-provenance/{memory.pk}").json()
    assert view["sources"][0]["changes"][0]["field"] == "text"


def test_a_conversation_source_never_goes_stale(world):
    from tests.factory import make_conversation

    conv = make_conversation(world.copilot, world.general)
    memory = write(world, sources=[{"kind": "conversation", "ref": str(conv.pk)}])
    set_mode("invalidate")
    check(world)
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE


def test_confirming_rebaselines_and_clears_the_flag(world, ticket_memory):
    from memory.provenance.services import memory_confirm_sources

    push(world, "ticket", "INC-12", {**TICKET, "resolution": "x"})
    check(world)
    memory_confirm_sources(actor=SYSTEM, memory_id=ticket_memory.pk, reason="still true")
    ticket_memory.refresh_from_db()
    assert not ticket_memory.stale
    assert check(world)["stale"] == 0
    assert MemorySource.objects.get(memory=ticket_memory).snapshot["resolution"] == "x"


def test_only_integrations_and_admins_push_sources(world):
    assert push(world, "ticket", "INC-1", TICKET).status_code == 200
    assert world.client("admin").put("/api/sources/ticket/INC-1", TICKET, format="json").status_code == 200
    assert world.client("copilot").put("/api/sources/ticket/INC-1", TICKET, format="json").status_code == 403
    assert world.client("reviewer").put("/api/sources/ticket/INC-1", TICKET, format="json").status_code == 403


@pytest.mark.parametrize(
    "kind,ref,body",
    [
        ("memory", "1", {"x": 1}),  # internal kinds are not pushed
        ("record", "crm/42", {"x": 1}),  # a record ref is source/type/id
        ("ticket", "INC-1", []),  # fields must be an object
        ("ticket", "INC-1", {}),
    ],
)
def test_bad_pushes_get_400_and_write_nothing(world, kind, ref, body):
    from knowledge.models import SourceState

    response = push(world, kind, ref, body)
    assert response.status_code == 400
    assert "error" in response.json()
    assert not SourceState.objects.exists()


def test_agents_see_provenance_only_of_memories_they_can_read(world):
    memory = write(world, owner=world.scribe, text="scribe's", sources=[])
    Memory.objects.filter(pk=memory.pk).update(store="self")
    assert world.client("copilot").get(f"/api/memory-provenance/{memory.pk}").status_code == 404
    assert world.client("scribe").get(f"/api/memory-provenance/{memory.pk}").status_code == 200
    assert world.client("integration").get(f"/api/memory-provenance/{memory.pk}").status_code == 403


def test_the_check_runs_a_constant_number_of_queries(world, django_assert_max_num_queries):
    push(world, "ticket", "INC-12", TICKET)
    for i in range(30):
        write(
            world,
            text=f"m{i}",
            sources=[{"kind": "ticket", "ref": "INC-12"}, {"kind": "kb", "ref": f"KB-{i}"}],
        )
    push(world, "ticket", "INC-12", {**TICKET, "status": "closed"})
    with django_assert_max_num_queries(20):
        counts = provenance_check(actor=SYSTEM)
    assert counts["stale"] == 30


def test_editing_or_deleting_a_cited_message_makes_dependants_stale(world):
    from knowledge.models import Message
    from tests.factory import post_messages

    edited_id, deleted_id = post_messages(
        world.general,
        [
            {"speaker": "alice", "text": "The VPN portal moved to vpn2.example.com"},
            {"speaker": "bob", "text": "Printer fixed"},
        ],
    )
    edited = write(world, text="portal moved", sources=[{"kind": "message", "ref": str(edited_id)}])
    deleted = write(world, text="printer ok", sources=[{"kind": "message", "ref": str(deleted_id)}])
    assert check(world)["stale"] == 0
    Message.objects.filter(pk=edited_id).update(text="The VPN portal moved to vpn3.example.com")
    Message.objects.filter(pk=deleted_id).delete()
    assert check(world)["stale"] == 2
    edited.refresh_from_db()
    deleted.refresh_from_db()
    assert edited.stale_reason == f"re-check: its source message:{edited_id} changed"
    assert deleted.stale_reason == f"re-check: its source message:{deleted_id} was deleted"


def test_a_requeued_memory_is_absent_from_recall_until_approved(world):
    from tests.factory import make_conversation

    make_conversation(world.copilot, world.general)
    set_mode("requeue")
    push(world, "ticket", "INC-77", TICKET)
    memory = write(
        world, text="Zebra-7 printers need firmware 9.4", sources=[{"kind": "ticket", "ref": "INC-77"}]
    )

    def recalled():
        body = (
            world.client("copilot")
            .post(
                "/api/memory/search",
                {"agent": "copilot", "q": "Zebra-7 firmware", "channel": "general"},
                format="json",
            )
            .json()
        )
        return [r["id"] for r in body["results"] if r["kind"] == "memory"]

    assert memory.pk in recalled()
    push(world, "ticket", "INC-77", {**TICKET, "resolution": "firmware 9.5"})
    check(world)
    assert memory.pk not in recalled()
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    assert memory.pk in recalled()


def test_revoking_a_memory_follows_the_invalidation_mode_for_its_dependants(world):
    base = write(world, text="base fact")
    derived = write(world, text="derived", sources=[{"kind": "memory", "ref": str(base.pk)}])
    derived2 = write(world, text="derived twice", sources=[{"kind": "memory", "ref": str(derived.pk)}])
    unrelated = write(world, text="unrelated", sources=[{"kind": "memory", "ref": str(derived2.pk + 1000)}])
    set_mode("invalidate")
    response = world.client("reviewer").post(
        f"/api/memory/{base.pk}/revoke", {"reason": "wrong"}, format="json"
    )
    assert response.status_code == 200, response.json()
    for memory in (derived, derived2, unrelated):
        memory.refresh_from_db()
    assert derived.status == derived2.status == Memory.INVALIDATED
    assert unrelated.status == Memory.ACTIVE and not unrelated.stale


def test_rejecting_a_memory_requeues_its_dependants_in_requeue_mode(world):
    base = write(world, text="queued fact", status=Memory.QUEUED)
    derived = write(world, text="derived", sources=[{"kind": "memory", "ref": str(base.pk)}])
    set_mode("requeue")
    world.client("reviewer").post(f"/api/memory/{base.pk}/reject", {"reason": "no"}, format="json")
    derived.refresh_from_db()
    assert (derived.status, derived.queue_reason) == (Memory.QUEUED, "requeued")
    assert derived.stale_reason == f"re-check: its source memory:{base.pk} changed"
