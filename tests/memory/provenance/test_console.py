"""The provenance panel on the memory page and the stale list."""

from knowledge.models import AuditEvent, Memory
from tests.memory.provenance.test_provenance import TICKET, check, push, write


def stale_memory(world):
    push(world, "ticket", "INC-12", TICKET)
    memory = write(world, sources=[{"kind": "ticket", "ref": "INC-12"}])
    push(world, "ticket", "INC-12", {**TICKET, "resolution": "upgrade to 5.2.2"})
    check(world)
    return memory


def test_memory_page_shows_each_source_state_and_the_changed_field(client, world):
    memory = stale_memory(world)
    client.force_login(world.reviewer)
    body = client.get(f"/memories/{memory.pk}/").content.decode()
    assert "ticket:INC-12" in body
    assert "changed" in body
    assert "<del>∅</del>" in body or "<del></del>" in body
    assert "upgrade to 5.2.2" in body
    assert "Confirm it still holds" in body


def test_stale_list_confirm_with_htmx_rebaselines(client, world):
    memory = stale_memory(world)
    client.force_login(world.reviewer)
    assert f"#{memory.pk}" in client.get("/memories/stale/").content.decode()
    response = client.post(
        f"/memories/stale/{memory.pk}", {"action": "confirm", "reason": "still right"}, HTTP_HX_REQUEST="true"
    )
    assert b"<html" not in response.content and b"confirmed" in response.content
    memory.refresh_from_db()
    assert not memory.stale
    assert AuditEvent.objects.filter(action="memory.sources_confirmed", reason="still right").exists()
    assert check(world)["stale"] == 0
    assert f"#{memory.pk}" not in client.get("/memories/stale/").content.decode()


def test_retiring_from_the_stale_list_needs_a_reason(client, world):
    memory = stale_memory(world)
    client.force_login(world.reviewer)
    client.post(f"/memories/stale/{memory.pk}", {"action": "retire", "reason": ""})
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE
    client.post(f"/memories/stale/{memory.pk}", {"action": "retire", "reason": "the fix changed"})
    memory.refresh_from_db()
    assert memory.status == Memory.INVALIDATED


def test_requeued_memories_appear_in_the_review_queue_with_their_reason(client, world):
    from knowledge.principals import services
    from tests.factory import SYSTEM

    services.setting_set(actor=SYSTEM, name="BRAIN_MEMORY_INVALIDATION", value="requeue")
    memory = stale_memory(world)
    client.force_login(world.reviewer)
    body = client.get("/review/").content.decode()
    assert f"memory-{memory.pk}" in body
    assert "re-check: its source ticket:INC-12 changed" in body
    # approving it again confirms it: the sources are re-baselined and it is no longer stale
    client.post(f"/review/{memory.pk}/approve")
    memory.refresh_from_db()
    assert (memory.status, memory.stale) == (Memory.ACTIVE, False)
    assert check(world)["requeued"] == 0


def test_requeued_memories_are_not_recalled_until_approved(world):
    from knowledge.principals import services
    from tests.factory import SYSTEM

    services.setting_set(actor=SYSTEM, name="BRAIN_MEMORY_INVALIDATION", value="requeue")
    memory = stale_memory(world)
    listed = world.client("copilot").get("/api/memory", {"status": "active"}).json()
    assert memory.pk not in [m["id"] for m in listed["results"]]


def test_check_now_button(client, world):
    stale_memory(world)
    client.force_login(world.reviewer)
    response = client.post("/memories/stale/check", follow=True)
    assert b"Checked" in response.content
