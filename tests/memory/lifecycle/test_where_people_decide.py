"""Where people decide (issue 59.3), over HTTP: a decision changes only memories the card shows,
each named with its store and person, and replace never retires another person's private memory;
a hint can be dismissed as unrelated (remembered, counted per hint); a contradiction is never
offered as a duplicate; one decision is one audit batch that one restore undoes; two queued
memories that contradict each other are hinted on both cards."""

import re

import pytest

from knowledge.models import AuditEvent, Channel, Memory
from knowledge.principal import Principal
from memory.models import HintVerdict
from tests import factory

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def rita(client, world):
    client.force_login(world.reviewer)
    return client


def card(body: str, memory) -> str:
    """One memory's card of a queue page."""
    found = re.search(rf'<article class="card qitem" id="memory-{memory.pk}".*?</article>', body, re.S)
    assert found, f"no card for memory {memory.pk}"
    return found.group(0)


def people(world, *names):
    """DMs of copilot with each person, so copilot reads (and the relation finder pairs) their
    private stores, as after a two-person Mem0 import."""
    for name in names:
        person = factory.make_person(name)
        channel = factory.make_channel(f"dm-{name}", kind=Channel.KIND_DM, person=person, agent=world.copilot)
        factory.make_conversation(world.copilot, channel)


def test_replace_never_retires_a_memory_in_another_persons_private_store(rita, world):
    people(world, "noor", "sam")
    sams = factory.make_memory(world.copilot, "My train leaves at 08:15", store="private:sam")
    noors_old = factory.make_memory(
        world.copilot, "My train leaves at 08:15 on weekdays", store="private:noor"
    )
    noors = factory.make_queued_memory(world.copilot, "My train leaves at 08:45", store="private:noor")
    shown = card(rita.get("/review/").content.decode(), noors)
    assert f'data-memory="{sams.pk}"' not in shown  # Sam's memory is no hint on Noor's card
    assert f'data-memory="{noors_old.pk}"' in shown and "private:noor, person noor" in shown
    rita.post(f"/review/{noors.pk}/approve", {"decision": "replace", "shown": str(noors_old.pk)})
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert statuses[noors.pk] == Memory.ACTIVE and statuses[noors_old.pk] == Memory.SUPERSEDED
    assert statuses[sams.pk] == Memory.ACTIVE


def test_an_approval_touches_only_what_the_card_listed(rita, world):
    first = factory.make_memory(
        world.copilot, "Noor's train leaves at 08:15", key="train.noor", value="08:15"
    )
    new = factory.make_queued_memory(
        world.copilot, "Noor's train leaves at 08:45", key="train.noor", value="08:45"
    )
    shown = card(rita.get("/review/").content.decode(), new)
    assert f'name="shown" value="{first.pk}"' in shown
    # another value came into force after the card was drawn (a restore, an import)
    late = factory.make_memory_row(
        world.copilot, "Noor's train leaves at 08:30", store="self", key="train.noor", value="08:30"
    )
    answer = rita.post(f"/review/{new.pk}/approve", {"decision": "replace", "shown": str(first.pk)}, **HX)
    text = answer.content.decode()
    assert f"would also retire or close #{late.pk}, which its card did not show" in text
    again = re.search(r'name="shown" value="([\d,]*)"', text).group(1)  # the card again, with it
    assert sorted(map(int, again.split(","))) == [first.pk, late.pk]
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert statuses[new.pk] == Memory.QUEUED and statuses[first.pk] == statuses[late.pk] == Memory.ACTIVE
    rita.post(f"/review/{new.pk}/approve", {"decision": "replace", "shown": f"{first.pk},{late.pk}"})
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert statuses[new.pk] == Memory.ACTIVE and statuses[first.pk] == statuses[late.pk] == Memory.SUPERSEDED


def test_a_hint_dismissed_as_unrelated_is_not_flagged_again_and_is_counted(rita, world):
    priya = factory.make_memory(world.scribe, "Priya is on call this week.", store="shared")
    dup = factory.make_queued_memory(
        world.copilot, "priya is on call this week.", store="shared", tier="episodic"
    )
    shown = card(rita.get("/review/").content.decode(), dup)
    assert "exact duplicate" in shown and 'name="hint" value="exact-duplicate"' in shown
    answer = rita.post(f"/review/{dup.pk}/unrelated", {"other": priya.pk, "hint": "exact-duplicate"}, **HX)
    text = answer.content.decode()
    assert "dismissed as unrelated" in text and "exact duplicate" not in text
    assert "exact duplicate" not in card(rita.get("/review/").content.decode(), dup)
    verdict = HintVerdict.objects.get()
    assert (verdict.low_id, verdict.high_id, verdict.verdict, verdict.actor_name) == (
        priya.pk, dup.pk, "unrelated", "rita",
    )  # fmt: skip
    event = AuditEvent.objects.get(action="memory.hint_dismissed")
    assert event.object_ids == [str(dup.pk), str(priya.pk)]
    assert Memory.objects.get(pk=dup.pk).status == Memory.QUEUED  # a dismissal decides nothing

    # over the API too; and a hint acted on counts as confirmed
    other = factory.make_queued_memory(world.copilot, "Priya is on call this week!", store="shared")
    api = world.client("reviewer")
    answer = api.post(
        f"/api/memory/{other.pk}/unrelated", {"other": priya.pk, "hint": "near-duplicate"}, format="json"
    )
    assert answer.status_code == 200 and answer.json()["verdict"] == "unrelated", answer.content
    third = factory.make_queued_memory(
        world.copilot, "PRIYA is on call this week.", store="shared", tier="procedural"
    )
    rita.post(f"/review/{third.pk}/duplicate", {"of": priya.pk, "hint": "exact-duplicate"})
    hints = api.get("/api/status").json()["conflicts"]["hints"]
    assert hints["exact-duplicate"] == {"unrelated": 1, "confirmed": 1, "precision": 0.5}
    assert hints["near-duplicate"] == {"unrelated": 1, "confirmed": 0, "precision": 0.0}
    assert hints["contradiction"]["precision"] is None
    assert 'id="hint-verdicts"' in rita.get("/knowledge/status/").content.decode()


def test_a_card_sent_back_after_a_decision_sends_its_forms_back_to_the_page_it_is_on(rita, world):
    """A card re-rendered in answer to a POST (here: a hint dismissed) carries `next` for its
    forms: the queue page the reviewer is on (htmx's HX-Current-URL, else the posted `next`),
    never the POST's own URL, which a plain form's redirect would then GET (405)."""
    priya = factory.make_memory(world.scribe, "Priya is on call this week.", store="shared")
    dup = factory.make_queued_memory(
        world.copilot, "priya is on call this week.", store="shared", tier="episodic"
    )
    nexts = lambda body: set(re.findall(r'name="next" value="([^"]*)"', card(body, dup)))  # noqa: E731
    assert nexts(rita.get("/review/?store=shared").content.decode()) == {"/review/?store=shared"}
    answer = rita.post(
        f"/review/{dup.pk}/unrelated",
        {"other": priya.pk, "hint": "exact-duplicate", "next": "/review/?store=shared"},
        HTTP_HX_CURRENT_URL="http://testserver/review/?store=shared&amp;order=newest".replace("&amp;", "&"),
        **HX,
    )
    assert "dismissed as unrelated" in answer.content.decode()
    assert nexts(answer.content.decode()) == {"/review/?store=shared&amp;order=newest"}
    factory.make_memory(world.scribe, "priya is on call this week!", store="shared")
    answer = rita.post(
        f"/review/{dup.pk}/unrelated",
        {"other": priya.pk, "hint": "near-duplicate", "next": "//evil.test/"},
        **HX,
    )
    assert nexts(answer.content.decode()) == {"/review/"}  # no page named that is on this site


def test_a_dismissed_contradiction_needs_no_decision_and_replace_leaves_it(rita, world):
    frozen = factory.make_memory(world.scribe, "Deploys are not allowed on Fridays.", store="shared")
    allowed = factory.make_queued_memory(world.copilot, "Deploys are allowed on Fridays.", store="shared")
    assert f'data-memory="{frozen.pk}"' in card(rita.get("/review/").content.decode(), allowed)
    rita.post(f"/review/{allowed.pk}/unrelated", {"other": frozen.pk, "hint": "contradiction"})
    assert f'data-memory="{frozen.pk}"' not in card(rita.get("/review/").content.decode(), allowed)
    rita.post(f"/review/{allowed.pk}/approve", {"shown": ""})
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert statuses[allowed.pk] == statuses[frozen.pk] == Memory.ACTIVE


def test_a_dismissal_is_for_reviewers_and_names_real_memories(client, world):
    a = factory.make_queued_memory(world.copilot, "one")
    assert (
        world.client("copilot")
        .post(f"/api/memory/{a.pk}/unrelated", {"other": a.pk, "hint": "duplicate"}, format="json")
        .status_code
        == 403
    )
    api = world.client("reviewer")
    assert (
        api.post(
            f"/api/memory/{a.pk}/unrelated", {"other": 99999, "hint": "duplicate"}, format="json"
        ).status_code
        == 404
    )
    same = api.post(f"/api/memory/{a.pk}/unrelated", {"other": a.pk, "hint": "duplicate"}, format="json")
    assert same.status_code == 400 and "other" in same.json()["fields"]
    bad = api.post(f"/api/memory/{a.pk}/unrelated", {"other": a.pk, "hint": "cousin"}, format="json")
    assert bad.status_code == 400 and "hint" in bad.json()["fields"]
    assert not HintVerdict.objects.exists()


def test_a_contradiction_is_never_offered_as_a_duplicate(rita, world):
    """Porto / Valencia: vectors near enough for a near-duplicate hint, and a contradiction (the
    model's, recorded while it waited): the card offers a decision, never "reject as duplicate"."""
    from knowledge.models import MemoryContradiction

    porto = factory.make_memory(world.scribe, "Our team offsite is in Porto in June", store="shared")
    valencia = factory.make_queued_memory(
        world.copilot, "Our team offsite is in Valencia in June", store="shared"
    )
    MemoryContradiction.objects.create(memory=valencia, other=porto, why="another city")
    Memory.objects.filter(pk=valencia.pk).update(queue_reason="conflict")
    factory.embed_all()  # the vectors that make near-duplicate hints
    shown = card(rita.get("/review/").content.decode(), valencia)
    assert f'class="conflict" data-memory="{porto.pk}"' in shown
    assert "Reject as duplicate" not in shown and "near-duplicate" not in shown


def test_one_decision_is_one_audit_batch_and_one_restore_undoes_it(rita, world):
    old = factory.make_memory(world.copilot, "Noor's train leaves at 08:15", key="train.noor", value="08:15")
    factory.make_queued_memory(
        world.copilot, "Ticket SUP-1 cites it", sources=[{"kind": "memory", "ref": str(old.pk)}]
    )
    new = factory.make_queued_memory(
        world.copilot, "Noor's train leaves at 08:45", key="train.noor", value="08:45"
    )
    rita.post(f"/review/{new.pk}/approve", {"decision": "replace", "shown": str(old.pk)})
    assert Memory.objects.get(pk=old.pk).status == Memory.SUPERSEDED
    approved = AuditEvent.objects.get(action="memory.approved", object_ids__contains=[str(new.pk)])
    batch = AuditEvent.objects.filter(batch_id=approved.batch_id)
    assert {e.action for e in batch} >= {"memory.approved", "memory.superseded", "memory.stale"}
    restore = world.client("admin").post(
        "/api/audit/restore", {"events": list(batch.values_list("pk", flat=True))}, format="json"
    )
    assert restore.status_code == 200, restore.content
    old, new = Memory.objects.get(pk=old.pk), Memory.objects.get(pk=new.pk)
    assert (old.status, old.superseded_by_id, old.valid_to) == (Memory.ACTIVE, None, None)
    assert new.status == Memory.QUEUED
    assert not Memory.objects.filter(stale=True).exists()


def test_two_queued_memories_that_contradict_each_other_are_hinted_on_both_cards(rita, world):
    allowed = factory.make_queued_memory(world.copilot, "Deploys are allowed on Fridays.", store="shared")
    forbidden = factory.make_queued_memory(
        world.copilot, "Deploys are not allowed on Fridays.", store="shared"
    )
    factory.make_queued_memory(world.copilot, "Deploys need a ticket.", store="shared")
    factory.embed_all()  # each card's near neighbours, queued ones too, are read with its hints
    body = rita.get("/review/").content.decode()
    for mine, theirs in ((allowed, forbidden), (forbidden, allowed)):
        shown = card(body, mine)
        assert f'class="conflict queued" data-memory="{theirs.pk}"' in shown, shown
        assert "Contradicts queued" in shown
    # dismissed as unrelated on one card, neither card flags the pair again
    rita.post(f"/review/{allowed.pk}/unrelated", {"other": forbidden.pk, "hint": "contradiction"})
    body = rita.get("/review/").content.decode()
    assert "Contradicts queued" not in card(body, allowed) and "Contradicts queued" not in card(
        body, forbidden
    )


def test_approving_by_card_names_store_and_person_of_what_it_retires(rita, world):
    people(world, "noor")
    old = factory.make_memory(world.copilot, "Noor's train leaves at 08:15", store="private:noor")
    new = factory.make_queued_memory(world.copilot, "Noor's train leaves at 08:45", store="private:noor")
    shown = card(rita.get("/review/").content.decode(), new)
    assert f"Replace: retire #{old.pk} (agent copilot, private:noor, person noor)" in shown
    done = rita.post(f"/review/{new.pk}/approve", {"decision": "replace", "shown": str(old.pk)}, follow=True)
    assert f"Retired #{old.pk} (agent copilot, private:noor, person noor)." in done.content.decode()
    assert Principal.system("x")  # the world is plain: no other decision was made


def _flagged_world(world):
    priya = factory.make_memory(world.scribe, "Priya is on call this week.", store="shared")
    queued = {
        "allowed": factory.make_queued_memory(
            world.copilot, "Deploys are allowed on Fridays.", store="shared"
        ),
        "forbidden": factory.make_queued_memory(
            world.copilot, "Deploys are not allowed on Fridays.", store="shared"
        ),
        "dup": factory.make_queued_memory(
            world.copilot, "priya is on call this week.", store="shared", tier="episodic"
        ),
        "plain": factory.make_queued_memory(world.copilot, "Invoices go out on the 1st.", store="shared"),
    }
    factory.embed_all()
    return priya, queued


def test_a_bulk_approval_names_what_it_would_put_in_force_and_asks_first(rita, world):
    priya, m = _flagged_world(world)
    ask = rita.get("/review/all?agent=copilot&action=approve").content.decode()
    flags = re.search(r'<div class="flags" id="confirm-flags">.*?</div>', ask, re.S).group(0)
    assert "3 of them would put 2 duplicates or contradictions in force" in flags
    assert f'data-memory="{m["dup"].pk}" data-other="{priya.pk}"' in flags and "exact-duplicate" in flags
    a, b = m["allowed"].pk, m["forbidden"].pk
    assert f'data-memory="{a}" data-other="{b}"' in flags or f'data-memory="{b}" data-other="{a}"' in flags
    assert "contradiction" in flags
    assert "Approve the other 1, leave these 3 queued" in ask and "Approve all 4, these 3 too" in ask
    token = re.search(r'name="snapshot" value="([^"]+)"', ask).group(1)
    refused = rita.post(
        "/review/all?agent=copilot", {"action": "approve", "snapshot": token}
    ).content.decode()
    assert "3 of these would put a duplicate or a contradiction in force" in refused
    assert not Memory.objects.filter(status=Memory.ACTIVE, owner=world.copilot).exists()
    done = rita.post(
        "/review/all?agent=copilot", {"action": "approve", "snapshot": token, "flagged": "leave"}, follow=True
    ).content.decode()
    assert "Approved 1 memory matching the filter" in done and "Left queued as you asked" in done
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert statuses[m["plain"].pk] == Memory.ACTIVE
    assert {statuses[m[k].pk] for k in ("allowed", "forbidden", "dup")} == {Memory.QUEUED}


def test_the_api_dry_run_names_the_flags_and_the_decision_must_say_include_or_leave(world):
    priya, m = _flagged_world(world)
    api = world.client("reviewer")
    dry = api.get("/api/memory/review?agent=copilot").json()
    assert sorted(dry["flagged"]) == sorted(m[k].pk for k in ("allowed", "forbidden", "dup"))
    assert {(f["memory"], f["other"], f["hint"]) for f in dry["flags"]} >= {
        (m["dup"].pk, priya.pk, "exact-duplicate")
    }
    refused = api.post(
        "/api/memory/review", {"action": "approve", "snapshot": dry["snapshot"]}, format="json"
    )
    assert refused.status_code == 400 and "flagged" in refused.json()["fields"]
    out = api.post(
        "/api/memory/review",
        {"action": "approve", "snapshot": dry["snapshot"], "flagged": "include"},
        format="json",
    ).json()
    assert sorted(out["done"]) == sorted(x.pk for x in m.values()) and out["left"] == []


def test_the_api_approval_with_shown_touches_nothing_it_did_not_show(world):
    first = factory.make_memory(
        world.copilot, "Noor's train leaves at 08:15", key="train.noor", value="08:15"
    )
    new = factory.make_queued_memory(
        world.copilot, "Noor's train leaves at 08:45", key="train.noor", value="08:45"
    )
    late = factory.make_memory_row(
        world.copilot, "Noor's train leaves at 08:30", store="self", key="train.noor", value="08:30"
    )
    api = world.client("reviewer")
    path = f"/api/memory/{new.pk}/approve"
    refused = api.post(path, {"decision": "replace", "shown": [first.pk]}, format="json")
    assert refused.status_code == 409 and refused.json()["unseen"] == [late.pk], refused.content
    from tests.openapi import response_schema, validate

    validate(response_schema("/api/memory/{memory_id}/approve", "post", 409), refused.json())
    assert Memory.objects.get(pk=new.pk).status == Memory.QUEUED
    done = api.post(path, {"decision": "replace", "shown": [first.pk, late.pk]}, format="json")
    assert done.status_code == 200 and done.json()["status"] == Memory.ACTIVE


def test_a_dismissed_pair_is_not_in_the_apis_related_either(world):
    frozen = factory.make_memory(world.scribe, "Deploys are not allowed on Fridays.", store="shared")
    allowed = factory.make_queued_memory(world.copilot, "Deploys are allowed on Fridays.", store="shared")
    api = world.client("reviewer")
    assert [r["memory"] for r in api.get(f"/api/memory/{allowed.pk}").json()["related"]] == [frozen.pk]
    api.post(
        f"/api/memory/{allowed.pk}/unrelated", {"other": frozen.pk, "hint": "contradiction"}, format="json"
    )
    assert api.get(f"/api/memory/{allowed.pk}").json()["related"] == []
