"""The one conflict rule (same store, same key, another value, overlapping validity), on every
route that can put a memory into force, and the conflicts already in force."""

import datetime

import pytest
from django.db import transaction
from django.utils import timezone

from curation.distiller import distilled_activate
from knowledge.entries.services import block_correct
from knowledge.models import AuditEvent, Memory
from knowledge.principal import Principal
from knowledge.principals.services import setting_set
from memory.consolidation.common import PlanConflict, merged_memories_activate
from memory.consolidation.find import Findings, find_conflicts_across_owners
from memory.lifecycle import selectors
from memory.lifecycle.write import WriteRequest, memory_write
from tests import factory

KEY = "customer.acme.contact"
ADMIN = Principal(kind="person", name="adam", role="admin")


def slack(world, owner=None, store="shared"):
    return factory.make_memory(
        owner or world.scribe, "Acme wants updates in Slack", store=store, key=KEY, value="Slack"
    )


def active_values(store="shared", key=KEY):
    return sorted(
        Memory.objects.filter(store=store, key=key, status="active").values_list("value", flat=True)
    )


def in_force(owner, text, value, store="shared", **fields):
    """A conflict in force, as data written before the rule: the row is put active directly."""
    memory = factory.make_queued_memory(owner, text, store=store, key=KEY, value=value, **fields)
    factory.set_state([memory.pk], status="active", queue_reason="", valid_from=timezone.now())
    return Memory.objects.get(pk=memory.pk)


def write(world, who, body):
    return world.client(who).post("/api/memory", {"scope": "shared", "key": KEY, **body}, format="json")


# --- API writes --------------------------------------------------------------------------------


def test_a_trusted_agents_conflicting_write_is_queued_with_reason_conflict(world):
    old = slack(world)
    response = write(world, "scribe", {"text": "Acme wants a phone call", "value": "phone"})
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "queued" and body["queue_reason"] == "conflict"
    assert f"#{old.pk}" in body["status_reason"]
    assert active_values() == ["Slack"]


def test_an_untrusted_agents_conflicting_write_is_queued_with_reason_conflict(world):
    slack(world)
    body = write(world, "copilot", {"text": "Acme wants a phone call", "value": "phone"}).json()
    assert body["status"] == "queued" and body["queue_reason"] == "conflict"


def test_a_trusted_write_that_names_what_it_supersedes_replaces_every_value_of_the_key(world):
    first = slack(world)
    second = in_force(world.scribe, "Acme wants e-mail", "e-mail")
    body = write(
        world, "scribe", {"text": "Acme wants a phone call", "value": "phone", "supersedes": first.pk}
    ).json()
    assert body["status"] == "active"
    assert active_values() == ["phone"]
    assert Memory.objects.get(pk=second.pk).superseded_by_id == body["id"]


def test_a_trusted_write_over_another_agents_value_waits_for_a_person(world):
    theirs = factory.make_memory(world.copilot, "Acme wants Slack", store="shared", key=KEY, value="Slack")
    mine = in_force(world.scribe, "Acme wants e-mail", "e-mail")
    body = write(world, "scribe", {"text": "phone", "value": "phone", "supersedes": mine.pk}).json()
    assert body["status"] == "queued" and body["queue_reason"] == "conflict"
    assert Memory.objects.get(pk=theirs.pk).status == "active"


def test_values_kept_as_of_different_times_are_no_conflict(world):
    ended = timezone.now() - datetime.timedelta(days=1)
    factory.make_memory(
        world.scribe,
        "Acme wanted Slack",
        store="shared",
        key=KEY,
        value="Slack",
        valid_from=ended - datetime.timedelta(days=30),
        valid_to=ended,
    )
    body = write(world, "scribe", {"text": "Acme wants a phone call", "value": "phone"}).json()
    assert body["status"] == "active"


# --- review approval ----------------------------------------------------------------------------


def test_approval_without_a_decision_is_refused_and_changes_nothing(world):
    old = slack(world)
    queued = factory.make_queued_memory(world.copilot, "phone", store="shared", key=KEY, value="phone")
    response = world.client("reviewer").post(f"/api/memory/{queued.pk}/approve", {}, format="json")
    assert response.status_code == 409
    assert response.json()["conflicts_with"] == [old.pk]
    assert Memory.objects.get(pk=queued.pk).status == "queued"
    assert active_values() == ["Slack"]


def test_approval_with_replace_retires_every_active_value_not_only_the_newest(world):
    first = slack(world)
    second = in_force(world.scribe, "Acme wants e-mail", "e-mail")
    queued = factory.make_queued_memory(world.copilot, "phone", store="shared", key=KEY, value="phone")
    response = world.client("reviewer").post(
        f"/api/memory/{queued.pk}/approve", {"decision": "replace"}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert active_values() == ["phone"]
    for old in (first, second):
        assert Memory.objects.get(pk=old.pk).superseded_by_id == queued.pk
    event = AuditEvent.objects.get(action="memory.approved", object_ids__contains=[str(queued.pk)])
    assert event.data["decision"] == "replace" and sorted(event.data["retired"]) == [first.pk, second.pk]
    assert event.actor_name == "rita"


def test_approval_keeping_both_as_of_different_times_closes_the_old_value_at_the_boundary(world):
    old = slack(world)
    queued = factory.make_queued_memory(world.copilot, "phone", store="shared", key=KEY, value="phone")
    boundary = timezone.now() + datetime.timedelta(hours=1)
    response = world.client("reviewer").post(
        f"/api/memory/{queued.pk}/approve",
        {"decision": "keep_both", "boundary": boundary.isoformat()},
        format="json",
    )
    assert response.status_code == 200, response.json()
    old, new = Memory.objects.get(pk=old.pk), Memory.objects.get(pk=queued.pk)
    assert old.status == new.status == "active"
    assert old.valid_to == boundary == new.valid_from
    assert selectors.conflict_pairs() == []


def test_keep_both_needs_a_boundary_after_the_old_value_began(world):
    slack(world)
    queued = factory.make_queued_memory(world.copilot, "phone", store="shared", key=KEY, value="phone")
    client = world.client("reviewer")
    assert (
        client.post(f"/api/memory/{queued.pk}/approve", {"decision": "keep_both"}, format="json").status_code
        == 400
    )
    early = (timezone.now() - datetime.timedelta(days=3)).isoformat()
    response = client.post(
        f"/api/memory/{queued.pk}/approve", {"decision": "keep_both", "boundary": early}, format="json"
    )
    assert response.status_code == 400 and "boundary" in response.json()["fields"]
    assert Memory.objects.get(pk=queued.pk).status == "queued"


def test_the_console_card_makes_the_reviewer_choose(client, world):
    old = slack(world)
    queued = factory.make_queued_memory(world.copilot, "phone", store="shared", key=KEY, value="phone")
    client.force_login(world.reviewer)
    body = client.get("/review/").content.decode()
    card = body.split(f'id="memory-{queued.pk}"')[1].split("</article>")[0]
    assert 'name="decision" value="replace" required' in card
    assert "Conflicts with" in card and f"#{old.pk}" in card
    client.post(f"/review/{queued.pk}/approve", {})
    assert Memory.objects.get(pk=queued.pk).status == "queued"
    client.post(f"/review/{queued.pk}/approve", {"decision": "replace"})
    assert active_values() == ["phone"]


# --- the other routes ------------------------------------------------------------------------


def test_the_distiller_queues_a_conflicting_memory_even_with_auto_activation(world):
    setting_set(actor=factory.SYSTEM, name="BRAIN_DISTILLER_AUTO_ACTIVATE", value=True)
    slack(world)
    memory = factory.make_queued_memory(world.scribe, "phone", store="shared", key=KEY, value="phone")
    assert memory.queue_reason == "conflict"
    Memory.objects.filter(pk=memory.pk).update(queue_reason="")
    assert distilled_activate(Memory.objects.get(pk=memory.pk)) == "queued"
    assert Memory.objects.get(pk=memory.pk).queue_reason == "conflict"
    assert active_values() == ["Slack"]


def test_dreaming_stage_b_writes_that_conflict_wait_for_a_reviewer(world):
    slack(world)
    memory = memory_write(
        actor=Principal.system("dreaming"),
        request=WriteRequest(owner=world.scribe, store="shared", text="phone", key=KEY, value="phone"),
        route="dreaming",
    )
    assert (memory.status, memory.queue_reason) == ("queued", "conflict")


def test_a_consolidation_merge_never_puts_a_second_value_in_force(world):
    slack(world)
    merged = factory.make_queued_memory(world.copilot, "phone", store="shared", key=KEY, value="phone")
    with pytest.raises(PlanConflict, match="conflicts with active memories"), transaction.atomic():
        merged_memories_activate(memory_ids=[merged.pk], plan=None, actor=ADMIN, now=timezone.now())
    assert active_values() == ["Slack"]


def test_a_corrected_queued_entry_block_goes_into_force_only_through_the_rule(world):
    slack(world, store="shared")
    entry = factory.make_entry(world.scribe, name="Acme", store="shared", blocks=["Acme contact"])
    block = entry.blocks.get()
    # a keyed block waiting for review (the rule reads key and value whatever the row is)
    factory.set_state([block.pk], status="queued", key=KEY, value="phone")
    block_correct(
        actor=ADMIN, entry_id=entry.pk, block_id=block.pk, text="Acme wants a phone call", reason="typo"
    )
    block = Memory.objects.get(pk=block.pk)
    assert (block.status, block.queue_reason) == ("queued", "conflict")
    assert active_values() == ["Slack"]


def test_restore_is_exempt_and_puts_back_exactly_what_was(world, client):
    """Restore writes an earlier state back as it was (see memory_activate's docstring): it does
    not activate anything, so it can bring back a retired value — which then shows as a
    conflict in force for a reviewer, instead of being silently refused."""
    old = slack(world)
    queued = factory.make_queued_memory(world.copilot, "phone", store="shared", key=KEY, value="phone")
    world.client("reviewer").post(f"/api/memory/{queued.pk}/approve", {"decision": "replace"}, format="json")
    event = AuditEvent.objects.get(action="memory.superseded", object_ids__contains=[str(old.pk)])
    response = world.client("admin").post("/api/audit/restore", {"events": [event.pk]}, format="json")
    assert response.status_code in (200, 201), response.content
    assert Memory.objects.get(pk=old.pk).status == "active"
    assert {m.pk for g in selectors.conflicts_in_force() for m in g.memories} == {old.pk, queued.pk}


# --- conflicts in force ---------------------------------------------------------------------


def test_conflicts_in_force_across_owners_are_found_and_shown_in_the_queue(client, world):
    theirs = in_force(world.copilot, "Acme wants Slack", "Slack")
    mine = in_force(world.scribe, "Acme wants a phone call", "phone")
    findings = Findings()
    find_conflicts_across_owners(findings, owner_id=world.scribe.pk)
    assert findings.counts["conflicts_across_owners"] == 1
    client.force_login(world.reviewer)
    body = client.get("/review/").content.decode()
    assert 'id="conflicts-in-force"' in body and f'data-memory="{theirs.pk}"' in body
    response = client.post(f"/review/{mine.pk}/keep", {"decision": "replace"})
    assert response.status_code == 302
    assert active_values() == ["phone"]
    event = AuditEvent.objects.get(action="memory.conflict_resolved")
    assert event.data["retired"] == [theirs.pk] and event.actor_name == "rita"


def test_status_shows_conflicts_in_force_with_an_alert(client, world):
    theirs = in_force(world.copilot, "Acme wants Slack", "Slack")
    in_force(world.scribe, "Acme wants a phone call", "phone")
    body = world.client("admin").get("/api/status").json()
    assert body["conflicts"]["memories"] == 2
    assert any("disagree" in a["text"] for a in body["alerts"])
    client.force_login(world.admin)
    page = client.get("/knowledge/status/").content.decode()
    assert 'id="conflict-groups"' in page and f"#{theirs.pk}" in page


def test_the_api_settles_a_conflict_in_force_keeping_both_as_of_different_times(world):
    old = in_force(world.copilot, "Acme wants Slack", "Slack")
    new = in_force(world.scribe, "Acme wants a phone call", "phone")
    boundary = timezone.now() + datetime.timedelta(minutes=5)
    client = world.client("reviewer")
    response = client.post(
        f"/api/memory/{new.pk}/keep",
        {"decision": "keep_both", "boundary": boundary.isoformat()},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert Memory.objects.get(pk=old.pk).valid_to == boundary == Memory.objects.get(pk=new.pk).valid_from
    assert selectors.conflict_pairs() == []
    assert (
        client.post(f"/api/memory/{new.pk}/keep", {"decision": "replace"}, format="json").status_code == 409
    )
    assert (
        world.client("copilot")
        .post(f"/api/memory/{new.pk}/keep", {"decision": "replace"}, format="json")
        .status_code
        == 403
    )


def test_consolidation_and_the_reconciler_fold_only_overlapping_values(world):
    """Values kept as of different times are history, not a conflict: the finder the
    consolidation run and the reconciler share leaves them alone, and folds an overlapping one."""
    from memory.consolidation.find import find_conflicts

    ended = timezone.now() - datetime.timedelta(days=10)
    old = in_force(world.scribe, "Acme wanted Slack", "Slack")
    Memory.objects.filter(pk=old.pk).update(valid_from=ended - datetime.timedelta(days=30), valid_to=ended)
    current = in_force(world.scribe, "Acme wants a phone call", "phone")
    findings = Findings()
    find_conflicts(findings, owner_id=world.scribe.pk, model=None, arbiter=False)
    assert findings.changes == []
    overlapping = in_force(world.scribe, "Acme wants e-mail", "e-mail")
    find_conflicts(findings, owner_id=world.scribe.pk, model=None, arbiter=False)
    (change,) = findings.changes
    assert {change.keep, *change.folds} == {current.pk, overlapping.pk} and old.pk not in change.folds
