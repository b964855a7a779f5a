"""Entries API: create, read, search, edit blocks and relations, delete — through the access
layer, with audit events for every write."""

import datetime

import pytest
from django.utils import timezone

from knowledge.models import AuditEvent, Entry, EntryRelation, Memory
from tests.factory import make_conversation, make_entry

KB = [{"kind": "kb", "ref": "KB-7"}]


def _create(client, **body):
    payload = {"name": "VPN client", "scope": "shared", **body}
    return client.post("/api/entries", payload, format="json")


def test_agent_creates_an_entry_with_blocks_and_gets_their_ids(world):
    response = _create(
        world.client("scribe"),
        type="System",
        aliases=["GlobalProtect", "vpn"],
        summary="The company VPN client.",
        properties={"vendor": "Palo Alto"},
        blocks=[{"text": "Version 5.2.1 fixes VPN-4012.", "sources": KB}, {"text": "Needs admin rights."}],
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["owner"] == "scribe" and body["store"] == "shared" and body["type"] == "system"
    assert [b["text"] for b in body["blocks"]] == ["Version 5.2.1 fixes VPN-4012.", "Needs admin rights."]
    assert [b["position"] for b in body["blocks"]] == [0, 1]
    assert body["blocks"][0]["sources"] == KB
    assert {b["status"] for b in body["blocks"]} == {"active"}  # scribe is trusted
    block_ids = [b["id"] for b in body["blocks"]]
    assert list(
        Memory.objects.filter(entry_id=body["id"]).order_by("position").values_list("pk", flat=True)
    ) == (block_ids)
    event = AuditEvent.objects.get(pk=body["audit_event"])
    assert event.action == "entry.created" and event.owner == "scribe" and event.counts == {"blocks": 2}
    assert "Version 5.2.1" not in str(event.data)  # ids and counts, never text
    assert {(r.object_type, r.before is None) for r in event.revisions.all()} == {
        ("entry", True),
        ("memory", True),
    }


def test_untrusted_agent_blocks_wait_for_review_and_person_blocks_are_active(world):
    queued = _create(world.client("copilot"), blocks=[{"text": "a guess"}]).json()
    assert queued["blocks"][0]["status"] == "queued"
    assert Memory.objects.get(pk=queued["blocks"][0]["id"]).queue_reason == "new"
    admin = _create(world.client("admin"), owner="copilot", blocks=[{"text": "a fact"}]).json()
    assert admin["blocks"][0]["status"] == "active"
    assert admin["blocks"][0]["author"] == {"kind": "person", "name": "adam"}


def test_bad_input_is_refused_per_field_and_writes_nothing(world):
    client = world.client("admin")
    cases = [
        ({"name": "", "owner": "copilot"}, "name"),
        ({"owner": "copilot", "properties": ["not", "an", "object"]}, "properties"),
        (
            {"owner": "copilot", "blocks": [{"text": "x", "sources": [{"kind": "rumour", "ref": "1"}]}]},
            "blocks",
        ),
        ({"owner": "copilot", "scope": "everywhere"}, "scope"),
        ({}, "owner"),  # a person must name the owner agent
        ({"owner": "nobody"}, "owner"),
        ({"name": 42, "owner": "copilot"}, "name"),  # a number is not a name
        ({"owner": "copilot", "blocks": [{"text": 7}]}, "blocks"),
    ]
    for body, field in cases:
        response = _create(client, **body)
        assert response.status_code == 400, (body, response.json())
        assert field in response.json()["fields"], (body, response.json())
    assert Entry.all_objects.count() == 0 and Memory.objects.count() == 0


def test_agents_write_only_as_themselves_and_only_into_their_stores(world):
    assert _create(world.client("copilot"), owner="scribe").status_code == 403
    assert _create(world.client("copilot"), scope="private:alice").status_code == 403
    make_conversation(world.copilot, world.dm_alice)
    assert _create(world.client("copilot"), scope="private:alice").status_code == 201
    assert _create(world.client("integration"), owner="copilot").status_code == 403


def test_agents_read_only_the_entries_their_stores_allow(world):
    mine = make_entry(world.copilot, name="Copilot notes", store="self")
    theirs = make_entry(world.scribe, name="Scribe notes", store="self")
    shared = make_entry(world.scribe, name="Shared notes", store="shared")
    copilot = world.client("copilot")
    names = {e["name"] for e in copilot.get("/api/entries").json()["results"]}
    assert names == {"Copilot notes", "Shared notes"}
    assert copilot.get(f"/api/entries/{theirs.pk}").status_code == 404
    assert copilot.get(f"/api/entries/{mine.pk}").status_code == 200
    # readable but owned by another agent: reading yes, writing no
    assert copilot.get(f"/api/entries/{shared.pk}").status_code == 200
    assert (
        copilot.patch(f"/api/entries/{shared.pk}", {"summary": "mine now"}, format="json").status_code == 403
    )
    assert {e["name"] for e in copilot.get("/api/entries", {"q": "notes"}).json()["results"]} == names
    assert world.client("integration").get("/api/entries").status_code == 403


@pytest.fixture
def catalogue(world):
    make_entry(
        world.copilot,
        name="Kubernetes cluster",
        type="system",
        aliases=["k8s", "kube"],
        summary="Where the internal services run.",
        blocks=["Three worker nodes in Frankfurt."],
    )
    make_entry(
        world.copilot, name="Alice Martin", type="person", aliases=["Ali"], blocks=["Leads the IT team."]
    )
    make_entry(
        world.copilot, name="Onboarding policy", type="policy", blocks=["New laptops run Kubernetes tools."]
    )
    make_entry(world.scribe, name="Payroll system", type="system", summary="Salaries are paid on the 25th.")


def _names(client, **params):
    response = client.get("/api/entries", params)
    assert response.status_code == 200, response.json()
    return [e["name"] for e in response.json()["results"]]


@pytest.mark.parametrize(
    "q, expected",
    [
        ("k8s", "Kubernetes cluster"),  # alias
        ("kubernetis", "Kubernetes cluster"),  # misspelt name
        ("kuber", "Kubernetes cluster"),  # partial name
        ("Ali", "Alice Martin"),  # alias
        ("alise martin", "Alice Martin"),  # misspelt
        ("salaries", "Payroll system"),  # summary
        ("Frankfurt", "Kubernetes cluster"),  # body
        ("leads", "Alice Martin"),  # body, stemmed
    ],
)
def test_search_finds_entries_by_name_alias_summary_or_body(world, catalogue, q, expected):
    assert _names(world.client("admin"), q=q)[0] == expected


def test_a_name_match_ranks_above_a_body_mention(world, catalogue):
    names = _names(world.client("admin"), q="kubernetes")
    assert names == ["Kubernetes cluster", "Onboarding policy"]


def test_search_matches_nothing_unrelated(world, catalogue):
    assert _names(world.client("admin"), q="zebra crossing") == []
    assert _names(world.client("admin"), q="!!!") == []


def test_filters_by_type_store_owner_author_and_update_time(world, catalogue):
    admin = world.client("admin")
    assert sorted(_names(admin, type="system")) == ["Kubernetes cluster", "Payroll system"]
    assert _names(admin, type="system", owner="scribe") == ["Payroll system"]
    assert _names(admin, store="self") == []
    make_entry(world.scribe, name="Scribe diary", store="self")
    assert _names(admin, store="agent") == ["Scribe diary"]
    assert _names(admin, q="kubernetes", type="policy") == ["Onboarding policy"]
    entry = Entry.objects.get(name="Alice Martin")
    block = entry.blocks.get()
    admin.patch(
        f"/api/entries/{entry.pk}/blocks/{block.pk}",
        {"text": "Leads IT.", "reason": "shorter"},
        format="json",
    )
    assert _names(admin, author="adam") == ["Alice Martin"]
    Entry.objects.filter(name="Payroll system").update(
        updated_at=timezone.now() - datetime.timedelta(days=30)
    )
    week_ago = (timezone.now() - datetime.timedelta(days=7)).date().isoformat()
    assert "Payroll system" not in _names(admin, updated_after=week_ago)
    assert _names(admin, updated_before=week_ago) == ["Payroll system"]
    bad = admin.get("/api/entries", {"updated_after": "last tuesday", "owner": "nobody"})
    assert bad.status_code == 400


def test_list_is_paginated_and_stays_within_a_few_queries(world, django_assert_max_num_queries):
    for i in range(30):
        make_entry(world.copilot, name=f"Laptop model {i:02d}", blocks=[f"Model {i} ships with 16 GB."])
    admin = world.client("admin")
    first = admin.get("/api/entries", {"page_size": 25, "sort": "name"}).json()
    second = admin.get("/api/entries", {"page_size": 25, "sort": "name", "page": 2}).json()
    assert first["count"] == 30 and first["pages"] == 2
    assert len(first["results"]) == 25 and len(second["results"]) == 5
    assert not {e["id"] for e in first["results"]} & {e["id"] for e in second["results"]}
    searched = admin.get("/api/entries", {"q": "laptop", "page": 2, "page_size": 20}).json()
    assert searched["count"] == 30 and len(searched["results"]) == 10
    with django_assert_max_num_queries(8):
        admin.get("/api/entries", {"q": "laptop model"})
    with django_assert_max_num_queries(8):
        admin.get("/api/entries", {"type": "system", "page_size": 100})


def test_metadata_edit_is_versioned_audited_and_refuses_a_stale_version(world):
    entry = make_entry(world.copilot, name="VPN", aliases=["vpn"])
    admin = world.client("admin")
    response = admin.patch(
        f"/api/entries/{entry.pk}",
        {"summary": "Company VPN.", "aliases": ["GP"], "version": 1},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["version"] == 2 and response.json()["aliases"] == ["GP"]
    event = AuditEvent.objects.get(pk=response.json()["audit_event"])
    assert event.action == "entry.updated" and sorted(event.data["fields"]) == ["aliases", "summary"]
    stale = admin.patch(f"/api/entries/{entry.pk}", {"summary": "Other.", "version": 1}, format="json")
    assert stale.status_code == 409
    assert "version 2" in stale.json()["error"]
    assert Entry.objects.get(pk=entry.pk).summary == "Company VPN."
    bad = admin.patch(f"/api/entries/{entry.pk}", {"properties": "x"}, format="json")
    assert bad.status_code == 400 and "properties" in bad.json()["fields"]


def test_correcting_a_block_requires_a_reason_and_keeps_the_history(world):
    entry = make_entry(world.copilot, name="VPN", blocks=["Client 5.2.1 fixes VPN-4012."])
    block = entry.created_blocks[0]
    admin = world.client("admin")
    url = f"/api/entries/{entry.pk}/blocks/{block.pk}"
    for body in ({"text": "Client 5.2.2 fixes VPN-4012."}, {"text": "Client 5.2.2.", "reason": "   "}):
        refused = admin.patch(url, body, format="json")
        assert refused.status_code == 400
        assert refused.json()["fields"]["reason"] == ["A reason is required to correct a block."]
    assert Memory.objects.get(pk=block.pk).version == 1
    response = admin.patch(
        url, {"text": "Client 5.2.2 fixes VPN-4012.", "reason": "5.2.1 was wrong"}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["version"] == 2 and body["author"] == {"kind": "person", "name": "adam"}
    versions = list(
        Memory.objects.get(pk=block.pk).versions.order_by("version").values_list("text", "reason")
    )
    assert versions == [
        ("Client 5.2.1 fixes VPN-4012.", ""),
        ("Client 5.2.2 fixes VPN-4012.", "5.2.1 was wrong"),
    ]
    event = AuditEvent.objects.get(pk=body["audit_event"])
    assert event.action == "block.corrected" and event.reason == "5.2.1 was wrong"
    assert event.revisions.get().before["text"] == "Client 5.2.1 fixes VPN-4012."
    stale = admin.patch(url, {"text": "x", "reason": "y", "version": 1}, format="json")
    assert stale.status_code == 409
    same = admin.patch(url, {"text": "Client 5.2.2 fixes VPN-4012.", "reason": "again"}, format="json")
    assert same.status_code == 400


def test_an_untrusted_agents_correction_goes_back_to_review(world):
    entry = make_entry(world.copilot, name="VPN", blocks=["v1"])
    block = entry.created_blocks[0]
    response = world.client("copilot").patch(
        f"/api/entries/{entry.pk}/blocks/{block.pk}", {"text": "v2", "reason": "newer"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["status"] == "queued"
    assert Memory.objects.get(pk=block.pk).queue_reason == "requeued"


def test_blocks_are_added_moved_and_removed_in_order(world):
    entry = make_entry(world.copilot, name="Steps", blocks=["one", "two", "three"])
    admin = world.client("admin")
    base = f"/api/entries/{entry.pk}/blocks"
    added = admin.post(base, {"text": "zero", "position": 0}, format="json")
    assert added.status_code == 201 and added.json()["status"] == "active"
    texts = lambda: [b["text"] for b in admin.get(f"/api/entries/{entry.pk}").json()["blocks"]]  # noqa: E731
    assert texts() == ["zero", "one", "two", "three"]
    three = entry.created_blocks[2]
    moved = admin.patch(f"{base}/{three.pk}", {"position": 1}, format="json")
    assert moved.status_code == 200 and moved.json()["position"] == 1
    assert texts() == ["zero", "three", "one", "two"]
    removed = admin.delete(f"{base}/{entry.created_blocks[0].pk}?reason=duplicate")
    assert removed.status_code == 200 and removed.json()["status"] == "invalidated"
    assert texts() == ["zero", "three", "two"]
    assert admin.delete(f"{base}/{entry.created_blocks[0].pk}").status_code == 404
    assert AuditEvent.objects.get(action="block.removed").reason == "duplicate"
    assert admin.post(base, {"text": ""}, format="json").status_code == 400


def test_a_relation_needs_evidence_and_a_visible_target(world):
    alice = make_entry(world.copilot, name="Alice", type="person")
    it = make_entry(world.copilot, name="IT team", type="organization")
    private = make_entry(world.copilot, name="Secret", store="self")
    admin = world.client("admin")
    url = f"/api/entries/{alice.pk}/relations"
    refused = admin.post(url, {"predicate": "member of", "target": it.pk}, format="json")
    assert refused.status_code == 400 and "sources" in refused.json()["fields"]
    refused = admin.post(url, {"predicate": "member of", "target": it.pk, "sources": []}, format="json")
    assert refused.status_code == 400
    assert EntryRelation.objects.count() == 0
    body = {"predicate": "Member of", "target": it.pk, "sources": [{"kind": "message", "ref": "m-12"}]}
    created = admin.post(url, {**body, "valid_from": "2024-03-01"}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["predicate"] == "member of" and created.json()["target"]["name"] == "IT team"
    detail = admin.get(f"/api/entries/{it.pk}").json()
    assert [r["source"]["name"] for r in detail["incoming_relations"]] == ["Alice"]
    narrower = admin.post(url, {**body, "target": private.pk}, format="json")
    assert narrower.status_code == 400 and "target" in narrower.json()["fields"]
    assert admin.post(url, {**body, "target": alice.pk}, format="json").status_code == 400
    assert admin.post(url, {**body, "target": 99999}, format="json").status_code == 400
    bad_interval = {**body, "valid_from": "2024-03-01", "valid_to": "2023-01-01"}
    assert admin.post(url, bad_interval, format="json").status_code == 400
    rel = created.json()["id"]
    assert admin.delete(f"/api/entries/{alice.pk}/relations/{rel}").status_code == 200
    assert not EntryRelation.objects.filter(pk=rel).exists()


def test_deleting_an_entry_hides_it_and_retires_its_blocks(world):
    entry = make_entry(world.copilot, name="Old VPN", blocks=["one", "two"])
    admin = world.client("admin")
    response = admin.delete(f"/api/entries/{entry.pk}?reason=obsolete")
    assert response.status_code == 200
    assert Entry.objects.filter(pk=entry.pk).count() == 0
    assert set(Memory.objects.filter(entry=entry).values_list("status", flat=True)) == {"invalidated"}
    assert world.client("copilot").get(f"/api/entries/{entry.pk}").status_code == 404
    assert _names(admin, q="old vpn") == []
    assert _names(admin, deleted="1") == ["Old VPN"]
    assert world.client("copilot").get("/api/entries", {"deleted": "1"}).status_code == 403
    assert admin.get(f"/api/entries/{entry.pk}").json()["deleted_at"] is not None
    event = AuditEvent.objects.get(pk=response.json()["audit_event"])
    assert event.action == "entry.deleted" and event.reason == "obsolete" and event.counts["blocks"] == 2


def test_projection_is_the_markdown_of_the_active_blocks(world):
    entry = make_entry(
        world.copilot,
        name="VPN",
        type="system",
        aliases=["GlobalProtect"],
        summary="The company VPN.",
        properties={"vendor": "Palo Alto"},
        blocks=[{"text": "Use client 5.2.2.", "sources": KB}],
    )
    world.client("copilot").post(
        f"/api/entries/{entry.pk}/blocks", {"text": "Unreviewed guess."}, format="json"
    )
    markdown = world.client("copilot").get(f"/api/entries/{entry.pk}/projection").json()["markdown"]
    assert markdown.startswith("# VPN\n")
    assert "GlobalProtect" in markdown and "Palo Alto" in markdown and "The company VPN." in markdown
    assert "Use client 5.2.2." in markdown and "kb:KB-7" in markdown
    assert "Unreviewed guess." not in markdown  # queued, not yet what the agent reads


def test_the_schema_describes_the_entries_and_audit_api(world):
    schema = world.client("admin").get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    text = schema.content.decode()
    for path in ("/api/entries", "/api/entries/{entry_id}/blocks/{block_id}", "/api/audit/restore"):
        assert path in text
