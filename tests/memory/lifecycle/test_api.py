"""Supersession, strict anti-drift, review and operator actions through the API."""

import pytest

from knowledge.models import AuditEvent, Memory, Revision
from knowledge.principals.services import setting_set
from tests import factory


def post(world, who, path, body=None):
    return world.client(who).post(path, body or {}, format="json")


def write(world, who, body):
    return post(world, who, "/api/memory", {"scope": "agent", **body})


# --- supersession -------------------------------------------------------------------------


def test_superseding_retires_the_old_memory_closes_it_and_makes_dependants_stale(world):
    old = write(world, "scribe", {"text": "Alice likes barbecue"}).json()
    derived = write(
        world,
        "scribe",
        {"text": "Invite Alice to the summer grill", "sources": [{"kind": "memory", "ref": old["id"]}]},
    ).json()
    unrelated = write(world, "scribe", {"text": "Bob is on call on Fridays"}).json()
    new = write(world, "scribe", {"text": "Alice is vegetarian", "supersedes": old["id"]}).json()
    assert new["status"] == "active"

    old_row, derived_row = Memory.objects.get(pk=old["id"]), Memory.objects.get(pk=derived["id"])
    assert old_row.status == Memory.SUPERSEDED
    assert old_row.superseded_by_id == new["id"]
    assert old_row.valid_to is not None
    assert old_row.valid_to.isoformat().replace("+00:00", "Z") == new["valid_from"]
    assert derived_row.stale is True
    assert f"memory:{old['id']}" in derived_row.stale_reason
    assert derived_row.status == Memory.ACTIVE  # flagged, still in force
    assert Memory.objects.get(pk=unrelated["id"]).stale is False

    superseded = AuditEvent.objects.get(action="memory.superseded")
    assert superseded.object_ids == [str(old["id"])]
    assert superseded.data == {"superseded_by": new["id"]}
    stale = AuditEvent.objects.get(action="memory.stale")
    assert stale.object_ids == [str(derived["id"])]
    assert Revision.objects.filter(event=stale, object_id=str(derived["id"])).get().after["stale"] is True
    # The history is visible from both ends.
    detail = world.client("reviewer").get(f"/api/memory/{old['id']}").json()
    assert detail["superseded_by"] == new["id"]


def test_an_untrusted_supersession_waits_for_approval(world):
    old = factory.make_memory(world.copilot, "VPN fixed by client 5.2.0")
    new = write(world, "copilot", {"text": "VPN fixed by client 5.2.1", "supersedes": old.pk}).json()
    assert new["status"] == "queued"
    old.refresh_from_db()
    assert old.status == Memory.ACTIVE
    assert post(world, "reviewer", f"/api/memory/{new['id']}/approve").status_code == 200
    old.refresh_from_db()
    assert old.status == Memory.SUPERSEDED and old.superseded_by_id == new["id"]


def test_retiring_another_agents_shared_memory_needs_a_reviewer(world):
    """Trust lets scribe's own writes go into force; superseding copilot's shared memory waits
    for a reviewer, and the old memory stays in force until then."""
    theirs = factory.make_memory(world.copilot, "The office wifi password rotates monthly", store="shared")
    new = write(
        world,
        "scribe",
        {"scope": "shared", "text": "The wifi password never rotates", "supersedes": theirs.pk},
    ).json()
    assert new["status"] == "queued"
    queued = Memory.objects.get(pk=new["id"])
    assert queued.queue_reason == "supersedes" and f"memory {theirs.pk}" in queued.status_reason
    theirs.refresh_from_db()
    assert theirs.status == Memory.ACTIVE
    assert post(world, "reviewer", f"/api/memory/{new['id']}/approve").status_code == 200
    theirs.refresh_from_db()
    assert theirs.status == Memory.SUPERSEDED and theirs.superseded_by_id == new["id"]
    # its own memories a trusted agent retires at once; a reviewer's write retires anyone's
    own = write(world, "scribe", {"scope": "shared", "text": "Standup is at 9"}).json()
    assert (
        write(
            world, "scribe", {"scope": "shared", "text": "Standup is at 10", "supersedes": own["id"]}
        ).json()["status"]
        == "active"
    )
    other = factory.make_memory(world.copilot, "Lunch is at noon", store="shared")
    by_reviewer = post(
        world,
        "reviewer",
        "/api/memory",
        {"agent": "scribe", "scope": "shared", "text": "Lunch is at one", "supersedes": other.pk},
    )
    assert by_reviewer.status_code == 201 and by_reviewer.json()["status"] == "active"
    other.refresh_from_db()
    assert other.status == Memory.SUPERSEDED


def test_an_agent_cannot_supersede_what_it_cannot_see_or_what_is_retired(world):
    hidden = factory.make_memory(world.scribe, "scribe's private note", store="self")
    response = write(world, "copilot", {"text": "x", "supersedes": hidden.pk})
    assert response.status_code == 400 and "supersedes" in response.json()["fields"]
    old = factory.make_memory(world.copilot, "old")
    write(world, "scribe", {"text": "y"})  # noise
    factory.make_memory(world.copilot, "newer", supersedes=old)
    response = write(world, "copilot", {"text": "again", "supersedes": old.pk})
    assert response.status_code == 400
    assert "superseded" in response.json()["fields"]["supersedes"][0]


# --- strict anti-drift --------------------------------------------------------------------

PREFS = "customer.acme.preferences"


def confident_fact(world, **extra):
    return factory.make_memory(
        world.copilot,
        key=PREFS,
        value={"channel": "slack"},
        text="Acme prefers Slack",
        confidence=0.95,
        **extra,
    )


def test_strict_anti_drift_refuses_a_contradiction_with_409_and_audits_it(world):
    setting_set(actor=factory.SYSTEM, name="BRAIN_STRICT_ANTI_DRIFT", value=True)
    fact = confident_fact(world)
    before = Memory.objects.count()
    response = write(world, "scribe", {"agent": "scribe", "key": PREFS, "value": {"channel": "email"}})
    # scribe's self store is another store: no conflict there.
    assert response.status_code == 201
    response = write(
        world, "copilot", {"key": PREFS, "value": {"channel": "email"}, "text": "Acme prefers e-mail"}
    )
    assert response.status_code == 409
    body = response.json()
    assert body["policy_violation"] == "memory_conflict"
    assert body["conflicts_with"] == [fact.pk]
    assert Memory.objects.count() == before + 1
    event = AuditEvent.objects.get(action="memory.policy_violation")
    assert event.reason == "memory_conflict"
    assert event.data["conflicts_with"] == [fact.pk]
    assert event.actor_name == "copilot"
    assert "e-mail" not in str(event.data)


def test_strict_anti_drift_allows_the_change_with_supersedes(world):
    setting_set(actor=factory.SYSTEM, name="BRAIN_STRICT_ANTI_DRIFT", value=True)
    fact = confident_fact(world)
    response = write(
        world,
        "copilot",
        {"key": PREFS, "value": {"channel": "email"}, "text": "Acme prefers e-mail", "supersedes": fact.pk},
    )
    assert response.status_code == 201
    assert post(world, "reviewer", f"/api/memory/{response.json()['id']}/approve").status_code == 200
    fact.refresh_from_db()
    assert fact.status == Memory.SUPERSEDED


def test_strict_anti_drift_lets_agreement_low_confidence_and_off_mode_through(world):
    confident_fact(world)
    # off (the default): the contradiction is written.
    assert write(world, "copilot", {"key": PREFS, "value": {"channel": "email"}}).status_code == 201
    setting_set(actor=factory.SYSTEM, name="BRAIN_STRICT_ANTI_DRIFT", value=True)
    # the same value again is no contradiction (and, being the same key and value, it is answered
    # with the memory that already says it)
    same = write(world, "copilot", {"key": PREFS, "value": {"channel": "slack"}, "text": "same"})
    assert same.status_code == 200 and same.json()["duplicate_of"]
    # a contradiction of a low-confidence or non-semantic memory is allowed
    factory.make_memory(world.copilot, key="k2", value=1, confidence=0.5)
    assert write(world, "copilot", {"key": "k2", "value": 2}).status_code == 201
    factory.make_memory(world.copilot, key="k3", value=1, tier="procedural")
    assert write(world, "copilot", {"key": "k3", "value": 2}).status_code == 201


def test_approving_a_queued_contradiction_is_refused_once_strict_mode_is_on(world):
    queued = write(world, "copilot", {"key": PREFS, "value": {"channel": "email"}}).json()
    fact = confident_fact(world)
    setting_set(actor=factory.SYSTEM, name="BRAIN_STRICT_ANTI_DRIFT", value=True)
    response = post(world, "reviewer", f"/api/memory/{queued['id']}/approve")
    assert response.status_code == 409
    assert response.json()["conflicts_with"] == [fact.pk]
    assert Memory.objects.get(pk=queued["id"]).status == Memory.QUEUED
    assert AuditEvent.objects.filter(action="memory.policy_violation", actor_name="rita").exists()
    # The reviewer may approve it as the successor of the memory it contradicts.
    response = post(world, "reviewer", f"/api/memory/{queued['id']}/approve", {"supersedes": fact.pk})
    assert response.status_code == 200, response.json()
    fact.refresh_from_db()
    assert fact.status == Memory.SUPERSEDED


# --- review -------------------------------------------------------------------------------


def test_approve_and_reject_need_a_reviewer_or_admin(world):
    first = write(world, "copilot", {"text": "one"}).json()
    second = write(world, "copilot", {"text": "two"}).json()
    for who in ("copilot", "scribe", "integration"):
        assert post(world, who, f"/api/memory/{first['id']}/approve").status_code == 403
        assert post(world, who, f"/api/memory/{first['id']}/reject", {"reason": "no"}).status_code == 403
    assert Memory.objects.get(pk=first["id"]).status == Memory.QUEUED

    approved = post(world, "reviewer", f"/api/memory/{first['id']}/approve")
    assert approved.status_code == 200
    assert approved.json()["status"] == "active"
    rejected = post(world, "admin", f"/api/memory/{second['id']}/reject", {"reason": "not true"})
    assert rejected.status_code == 200
    assert rejected.json()["status"] == "rejected"
    assert rejected.json()["status_reason"] == "not true"
    event = AuditEvent.objects.get(action="memory.rejected")
    assert (event.actor_name, event.reason) == ("adam", "not true")
    assert AuditEvent.objects.get(action="memory.approved").actor_name == "rita"


def test_reject_needs_a_reason(world):
    memory = write(world, "copilot", {"text": "one"}).json()
    for body in ({}, {"reason": ""}, {"reason": "   "}):
        response = post(world, "reviewer", f"/api/memory/{memory['id']}/reject", body)
        assert response.status_code == 400
        assert "reason" in response.json()["fields"]
    assert Memory.objects.get(pk=memory["id"]).status == Memory.QUEUED


def test_a_decided_memory_cannot_be_decided_again(world):
    memory = write(world, "copilot", {"text": "one"}).json()
    assert post(world, "reviewer", f"/api/memory/{memory['id']}/approve").status_code == 200
    response = post(world, "admin", f"/api/memory/{memory['id']}/reject", {"reason": "late"})
    assert response.status_code == 409
    assert "approved by rita" in response.json()["error"]
    assert response.json()["status"] == "active"
    assert post(world, "admin", f"/api/memory/{memory['id']}/approve").status_code == 409
    assert AuditEvent.objects.filter(action__in=["memory.approved", "memory.rejected"]).count() == 1


def test_unknown_ids_get_404(world):
    assert post(world, "reviewer", "/api/memory/999999/approve").status_code == 404
    assert post(world, "reviewer", "/api/memory/999999/reject", {"reason": "x"}).status_code == 404
    assert post(world, "reviewer", "/api/memory/999999/pin").status_code == 404
    assert world.client("reviewer").get("/api/memory/999999").status_code == 404


def test_edit_then_approve_keeps_both_versions(world):
    memory = write(world, "copilot", {"text": "VPN fixed by 5.2.0"}).json()
    response = post(
        world,
        "reviewer",
        f"/api/memory/{memory['id']}/approve",
        {"text": "VPN fixed by 5.2.1", "reason": "typo"},
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["version"], body["text"]) == ("active", 2, "VPN fixed by 5.2.1")
    assert body["content_hash"] != memory["content_hash"]
    detail = world.client("copilot").get(f"/api/memory/{memory['id']}").json()
    assert [(v["version"], v["text"]) for v in detail["versions"]] == [
        (2, "VPN fixed by 5.2.1"),
        (1, "VPN fixed by 5.2.0"),
    ]
    assert detail["versions"][0]["author"] == {"kind": "person", "name": "rita"}
    event = AuditEvent.objects.get(action="memory.approved")
    assert event.data["edited"] is True and event.data["from_version"] == 1
    assert "5.2.1" not in str(event.data) + event.reason


def test_rejecting_a_memory_makes_memories_citing_it_stale(world):
    queued = write(world, "copilot", {"text": "guess"}).json()
    derived = factory.make_memory(
        world.copilot, "built on the guess", sources=[{"kind": "memory", "ref": str(queued["id"])}]
    )
    post(world, "reviewer", f"/api/memory/{queued['id']}/reject", {"reason": "a guess"})
    derived.refresh_from_db()
    assert derived.stale and "rejected" in derived.stale_reason


# --- operator actions ---------------------------------------------------------------------


def test_pin_unpin_revoke_and_promote(world):
    memory = factory.make_memory(
        world.copilot, "The VPN gateway is vpn.example.com", tier="episodic", confidence=0.6
    )
    url = f"/api/memory/{memory.pk}"
    assert post(world, "copilot", f"{url}/pin").status_code == 403
    assert post(world, "reviewer", f"{url}/pin").json()["pinned"] is True
    assert post(world, "reviewer", f"{url}/pin").status_code == 200  # idempotent
    assert AuditEvent.objects.filter(action="memory.pinned").count() == 1
    assert post(world, "reviewer", f"{url}/unpin").json()["pinned"] is False

    promoted = post(world, "reviewer", f"{url}/promote").json()
    assert (promoted["tier"], promoted["expires_at"]) == ("semantic", None)
    promoted = post(world, "reviewer", f"{url}/promote", {"confidence": 0.9}).json()
    assert promoted["confidence"] == 0.9
    response = post(world, "reviewer", f"{url}/promote", {"tier": "working"})
    assert response.status_code == 400 and "tier" in response.json()["fields"]
    response = post(world, "reviewer", f"{url}/promote", {"confidence": 0.5})
    assert response.status_code == 400
    event = AuditEvent.objects.filter(action="memory.promoted").first()
    assert event.data == {"from_confidence": 0.6, "to_confidence": 0.9}

    assert post(world, "reviewer", f"{url}/revoke").status_code == 400
    revoked = post(world, "reviewer", f"{url}/revoke", {"reason": "the gateway moved"}).json()
    assert (revoked["status"], revoked["status_reason"]) == ("invalidated", "the gateway moved")
    assert post(world, "reviewer", f"{url}/revoke", {"reason": "again"}).status_code == 409
    assert post(world, "reviewer", f"{url}/pin").status_code == 409
    assert AuditEvent.objects.get(action="memory.revoked").reason == "the gateway moved"


# --- reading ------------------------------------------------------------------------------


def test_agents_read_only_what_their_stores_allow(world):
    mine = factory.make_memory(world.copilot, "copilot self")
    theirs = factory.make_memory(world.scribe, "scribe self")
    shared = factory.make_memory(world.scribe, "shared note", store="shared")
    client = world.client("copilot")
    assert client.get(f"/api/memory/{mine.pk}").status_code == 200
    assert client.get(f"/api/memory/{shared.pk}").status_code == 200
    assert client.get(f"/api/memory/{theirs.pk}").status_code == 403
    ids = {m["id"] for m in client.get("/api/memory").json()["results"]}
    assert ids == {mine.pk, shared.pk}
    everything = {m["id"] for m in world.client("reviewer").get("/api/memory").json()["results"]}
    assert {mine.pk, theirs.pk, shared.pk} <= everything
    assert world.client("integration").get("/api/memory").status_code == 403


def test_list_filters_and_pagination(world):
    for i in range(5):
        factory.make_memory(world.copilot, f"semantic fact {i}", category="fact")
    factory.make_memory(world.copilot, "a working note", tier="working")
    factory.make_queued_memory(world.copilot, "waiting one")
    factory.make_memory(world.scribe, "scribe shared", store="shared", key="team.oncall")
    client = world.client("reviewer")

    def ids(query):
        response = client.get("/api/memory", query)
        assert response.status_code == 200, response.json()
        return response.json()

    assert ids({"tier": "working"})["count"] == 1
    assert ids({"status": "queued"})["count"] == 1
    assert ids({"category": "fact"})["count"] == 5
    assert ids({"store": "shared"})["count"] == 1
    assert ids({"store": "agent", "agent": "copilot"})["count"] == 7
    assert ids({"agent": "scribe"})["count"] == 1
    assert ids({"q": "WORKING"})["count"] == 1
    assert ids({"q": "oncall"})["count"] == 1
    page = ids({"agent": "copilot", "page_size": 3, "page": 2})
    assert (page["count"], page["pages"], len(page["results"])) == (7, 3, 3)
    assert ids({"page": 9})["results"] == []
    assert client.get("/api/memory", {"tier": "eternal"}).status_code == 400
    assert client.get("/api/memory", {"page_size": 1000}).status_code == 400
    assert client.get("/api/memory", {"colour": "red"}).status_code == 400


def test_a_page_past_the_deepest_is_a_400_json_as_for_entries(world):
    factory.make_memory(world.copilot, "one fact to page through")
    client = world.client("copilot")
    for page in ("9223372036854775807", "1000001", "0", "two"):
        answer = client.get("/api/memory", {"page": page})
        entries = client.get("/api/entries", {"page": page})
        assert answer.status_code == entries.status_code == 400, page
        assert answer.json()["error"] == entries.json()["error"] == "invalid"
        assert list(answer.json()["fields"]) == ["page"]
    too_deep = client.get("/api/memory", {"page": "9223372036854775807"}).json()
    assert too_deep["fields"]["page"] == ["1 ≤ page ≤ 1,000,000 and 1 ≤ page_size ≤ 200."]
    # The deepest page there is still answers, empty.
    deepest = client.get("/api/memory", {"page": 1_000_000, "page_size": 200})
    assert deepest.status_code == 200 and deepest.json()["results"] == []


def test_list_queries_do_not_grow_with_the_page(world, django_assert_max_num_queries):
    for i in range(30):
        factory.make_memory(world.copilot, f"fact {i}", sources=[{"kind": "kb", "ref": f"KB-{i}"}])
    client = world.client("copilot")
    client.get("/api/memory")
    # token, the agent's readable stores (2), count, page, sources — whatever the page size
    with django_assert_max_num_queries(6):
        response = client.get("/api/memory", {"page_size": 30})
    assert len(response.json()["results"]) == 30
    assert response.json()["results"][0]["sources"]


def test_a_reviewer_revises_an_active_memory_and_the_history_keeps_both(world):
    memory = factory.make_memory(world.copilot, "Support hours end at 16:00.")
    url = f"/api/memory/{memory.pk}/revise"
    assert post(world, "copilot", url, {"text": "x", "reason": "y"}).status_code == 403
    response = post(world, "reviewer", url, {"text": "Support hours end at 18:00."})
    assert response.status_code == 400 and "reason" in response.json()["fields"]
    body = post(world, "reviewer", url, {"text": "Support hours end at 18:00.", "reason": "new hours"}).json()
    assert (body["status"], body["version"]) == ("active", 2)
    versions = world.client("reviewer").get(f"/api/memory/{memory.pk}").json()["versions"]
    assert [v["text"] for v in versions] == ["Support hours end at 18:00.", "Support hours end at 16:00."]


def test_revising_a_memory_to_the_text_it_has_is_refused_as_nothing_changed(world):
    memory = factory.make_memory(world.copilot, "Support hours end at 16:00.")
    url = f"/api/memory/{memory.pk}/revise"
    response = post(world, "reviewer", url, {"text": "Support hours end at 16:00.", "reason": "check"})
    assert response.status_code == 400 and "Nothing changed" in response.json()["fields"]["text"][0]
    assert Memory.objects.get(pk=memory.pk).version == 1
    assert not AuditEvent.objects.filter(action="memory.revised").exists()


def test_the_api_write_walk_never_calls_back_up_from_the_base_layer(world, monkeypatch):
    """POST /api/memory runs the activation chain in the lifecycle layer (decides there, stores
    through knowledge.memories, carries out there): the chain the base layer holds for entry
    blocks is never called, not even for a write that supersedes another (its decision retires
    one)."""
    from knowledge.memories import activation

    def climbed(**kwargs):
        raise AssertionError("the write walk called back up through knowledge.memories.activation")

    old = write(world, "scribe", {"text": "Alice likes barbecue"}).json()
    monkeypatch.setattr(activation, "_activate", climbed)
    new = write(world, "scribe", {"text": "Alice is vegetarian", "supersedes": old["id"]})
    queued = write(world, "copilot", {"text": "Bob is on call on Fridays"})
    assert (new.status_code, new.json()["status"]) == (201, "active")
    assert (queued.status_code, queued.json()["status"]) == (201, "queued")
    assert Memory.objects.get(pk=old["id"]).status == Memory.SUPERSEDED
    assert AuditEvent.objects.filter(action="memory.written", object_ids=[str(new.json()["id"])]).exists()
    # The entry-block route does go through it (so the patch above is really in the way).
    from knowledge.entries.services import block_add

    entry = factory.make_entry(world.copilot)
    with pytest.raises(AssertionError, match="called back up"):
        block_add(actor=factory.SYSTEM, entry_id=entry.pk, text="a block")
