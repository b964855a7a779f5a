"""Duplicates at review: an agent's exact duplicate is answered with the existing memory, and
each queued card shows its exact and near duplicates with a one-click "Reject as duplicate"."""

from knowledge.models import AuditEvent, Memory
from tests import factory


def test_an_agents_exact_duplicate_is_answered_with_the_existing_memory(world):
    first = world.client("copilot").post(
        "/api/memory", {"scope": "shared", "text": "VPN-4012 is fixed by client 5.2.1"}, format="json"
    )
    assert first.status_code == 201
    count = Memory.objects.count()
    again = world.client("scribe").post(
        "/api/memory", {"scope": "shared", "text": "  vpn-4012 is FIXED by   client 5.2.1 "}, format="json"
    )
    assert again.status_code == 200
    assert again.json()["duplicate_of"] == first.json()["id"] == again.json()["id"]
    assert Memory.objects.count() == count


def test_the_same_key_and_value_is_an_exact_duplicate(world):
    body = {"scope": "agent", "key": "acme.sla", "value": "4h"}
    first = world.client("copilot").post(
        "/api/memory", {**body, "text": "Acme's SLA is 4 hours"}, format="json"
    )
    again = world.client("copilot").post(
        "/api/memory", {**body, "text": "SLA for Acme: four hours"}, format="json"
    )
    assert again.status_code == 200 and again.json()["duplicate_of"] == first.json()["id"]


def test_the_same_text_under_another_key_is_another_fact(world):
    """A store of key -> value items may hold one value under many keys: same text, different
    keys is two memories; same text with no key on either side is still a duplicate."""
    body = {"scope": "agent", "text": '{"v": 1}', "value": {"v": 1}}
    first = world.client("copilot").post("/api/memory", {**body, "key": "ns.a.k"}, format="json")
    other = world.client("copilot").post("/api/memory", {**body, "key": "ns.b.k"}, format="json")
    assert first.status_code == 201 and other.status_code == 201
    assert other.json()["id"] != first.json()["id"] and "duplicate_of" not in other.json()
    plain = world.client("copilot").post("/api/memory", {"scope": "agent", "text": '{"v": 1}'}, format="json")
    assert plain.status_code == 200 and plain.json()["duplicate_of"] == first.json()["id"]


def test_a_duplicate_in_another_store_is_stored(world):
    world.client("copilot").post("/api/memory", {"scope": "shared", "text": "Same words"}, format="json")
    other = world.client("copilot").post(
        "/api/memory", {"scope": "agent", "text": "Same words"}, format="json"
    )
    assert other.status_code == 201 and "duplicate_of" not in other.json()


def test_the_queue_card_shows_exact_and_near_duplicates_and_rejects_in_one_click(client, world):
    active = factory.make_memory(world.scribe, "Acme's main contact is Jane Doe.", store="shared")
    original = factory.make_queued_memory(
        world.scribe, "The on-call engineer this week is Priya.", store="shared"
    )
    copy = factory.make_queued_memory(
        world.scribe, "the on-call engineer this week is  Priya.", store="shared"
    )
    near = factory.make_queued_memory(world.scribe, "Jane Doe is the main contact at Acme.", store="shared")
    other = factory.make_queued_memory(world.scribe, "Initech pays invoices within 60 days.", store="shared")
    factory.make_memory(world.scribe, "Initech pays invoices within 30 days.", store="shared")
    factory.embed_all()
    client.force_login(world.reviewer)
    body = client.get("/review/").content.decode()

    def card(memory):
        return body.split(f'id="memory-{memory.pk}"')[1].split("</article>")[0]

    assert f'class="dup exact" data-memory="{original.pk}"' in card(copy)
    assert f'class="dup near" data-memory="{active.pk}"' in card(near)
    assert "Reject as duplicate of #" in card(near)
    assert 'class="dup' not in card(other)  # another number is another fact

    response = client.post(f"/review/{copy.pk}/duplicate", {"of": original.pk})
    assert response.status_code == 302
    copy = Memory.objects.get(pk=copy.pk)
    assert copy.status == "rejected" and copy.status_reason == f"duplicate of #{original.pk}"
    event = AuditEvent.objects.get(action="memory.rejected", object_ids__contains=[str(copy.pk)])
    assert event.data["duplicate_of"] == original.pk and event.actor_name == "rita"


def test_reject_as_duplicate_needs_a_live_original(client, world):
    memory = factory.make_queued_memory(world.scribe, "x", store="shared")
    client.force_login(world.reviewer)
    client.post(f"/review/{memory.pk}/duplicate", {"of": 999999})
    assert Memory.objects.get(pk=memory.pk).status == "queued"


def test_a_duplicate_write_adds_the_sources_it_cites_and_loses_none(world):
    """Three writes of one fact citing three KB articles: one memory citing all three, each
    added source fingerprinted and audited, and the answer says nothing new was stored."""
    from knowledge.models import AuditEvent, MemorySource

    client = world.client("scribe")
    body = {"scope": "shared", "text": "VPN-4012 is fixed by client 5.2.1"}
    first = client.post("/api/memory", {**body, "sources": [{"kind": "kb", "ref": "KB-1"}]}, format="json")
    second = client.post("/api/memory", {**body, "sources": [{"kind": "kb", "ref": "KB-2"}]}, format="json")
    recased = {
        "scope": "shared",
        "text": "vpn-4012 is FIXED by client 5.2.1",
        "sources": [{"kind": "kb", "ref": "KB-3"}],
    }
    third = client.post("/api/memory", recased, format="json")
    repeat = client.post("/api/memory", {**body, "sources": [{"kind": "kb", "ref": "KB-2"}]}, format="json")
    assert first.status_code == 201
    for answer in (second, third, repeat):
        assert answer.status_code == 200
        assert (answer.json()["duplicate_of"], answer.json()["written"]) == (first.json()["id"], False)
    assert sorted(s["ref"] for s in third.json()["sources"]) == ["KB-1", "KB-2", "KB-3"]
    memory = Memory.objects.get(pk=first.json()["id"])
    assert sorted(memory.sources.values_list("ref", flat=True)) == ["KB-1", "KB-2", "KB-3"]
    assert Memory.objects.filter(text__icontains="vpn-4012").count() == 1
    added = AuditEvent.objects.filter(action="memory.sources_added", object_ids=[str(memory.pk)])
    assert sorted(e.data["sources"][0] for e in added) == ["kb:KB-2", "kb:KB-3"]  # the repeat adds none
    assert MemorySource.objects.filter(memory=memory).count() == 3


def test_an_import_repeating_a_memory_adds_its_source_to_it(world):
    """The bulk path answers duplicates with the same helper."""
    from knowledge.principal import Principal
    from memory.lifecycle.bulk import memory_write_many

    actor = Principal.for_agent(world.scribe)
    first = memory_write_many(
        actor=actor,
        owner=world.scribe,
        store="self",
        items=[{"text": "Acme renews in May", "sources": [{"kind": "kb", "ref": "KB-9"}]}],
    )[0]
    again = memory_write_many(
        actor=actor,
        owner=world.scribe,
        store="self",
        items=[{"text": "acme renews in may", "sources": [{"kind": "kb", "ref": "KB-10"}]}],
    )[0]
    assert again.duplicate_of == first.pk
    assert sorted(Memory.objects.get(pk=first.pk).sources.values_list("ref", flat=True)) == ["KB-10", "KB-9"]
