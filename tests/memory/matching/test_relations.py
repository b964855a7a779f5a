"""The relation finder: the code rules on pairs of texts (made up here, none from the dev set)
and the `related` list a queued memory carries through the API."""

import pytest

from knowledge.models import Memory
from knowledge.principal import Principal
from memory.lifecycle.duplicates import NEAR_COSINE, queue_duplicate_hints
from memory.matching.relations import CONTRADICTION, DUPLICATE, classify, related_for
from tests import factory


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        ("The canteen serves lunch until 14:00.", "The canteen serves lunch until 3pm.", "number"),
        (
            "The reboot loop is fixed by gateway firmware 2.1.4.",
            "The reboot loop is fixed by gateway firmware 2.1.6.",
            "number",
        ),
        ("The parking garage accepts visitors.", "The parking garage does not accept visitors.", "negation"),
        ("Ravi is no longer on the hiring panel.", "Ravi is on the hiring panel.", "negation"),
        ("Smoking is allowed on the roof terrace.", "Smoking is forbidden on the roof terrace.", "antonym"),
        (
            "The roof terrace is open to visitors.",
            "The roof terrace is closed to visitors.",
            "antonym",
        ),
        ("Deploys are allowed on Fridays.", "deploys are prohibited every Friday", "antonym"),
        ("The lab key is kept by Ingrid Holm.", "The lab key is kept by Olaf Berg.", "entity"),
    ],
)
def test_contradictions_by_kind(a, b, kind):
    relation = classify(a, b)
    assert (relation.relation, relation.kind) == (CONTRADICTION, kind), relation
    assert relation.why
    assert classify(b, a).relation == CONTRADICTION  # either order


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The canteen closes at 5pm.", "the canteen  closes at 17:00"),
        ("Invoices are due within thirty days.", "Invoices are due within 30 days."),
        ("Ingrid Holm owns the lab inventory.", "The lab inventory is owned by Ingrid Holm."),
    ],
)
def test_duplicates(a, b):
    assert classify(a, b).relation == DUPLICATE


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # another thing: another ticket, another person of the same first name
        ("TKT-1201 is fixed in 4.2.", "TKT-1210 is fixed in 4.3."),
        ("Ravi Shah likes jazz.", "Ravi Mehta likes opera."),
        # two slots differ: another subject, not another value
        ("The Oslo team meets at 9:00.", "The Bergen team meets at 10:30."),
        # a negation and the opposite word say the same
        ("Pets are not allowed in the office.", "Pets are forbidden in the office."),
        # an added detail
        ("The canteen serves lunch.", "The canteen serves lunch, vegan options on Tuesdays at 12:00."),
        # another subject
        ("The canteen serves lunch.", "Ravi Shah likes jazz."),
    ],
)
def test_neither(a, b):
    assert classify(a, b).relation != CONTRADICTION
    if a.startswith("Pets"):
        return
    assert classify(a, b).relation != DUPLICATE


def test_open_and_closed_is_a_contradiction_never_a_duplicate():
    relation = classify("The roof terrace is closed to visitors.", "The roof terrace is open to visitors.")
    assert relation.relation == CONTRADICTION
    assert "open" in relation.why and "closed" in relation.why


def test_two_values_each_said_to_be_the_only_one_contradict():
    """Phone against e-mail was an opposite pair of the old list drawn from the dev set; now
    "only" says it: each side's one value excludes the other's."""
    relation = classify(
        "Acme wants support updates by phone only.", "Acme wants support updates by e-mail only."
    )
    assert (relation.relation, relation.kind) == (CONTRADICTION, "entity")
    assert "phone" in relation.why and "mail" in relation.why
    relation = classify("Acme wants support updates by phone.", "Acme wants support updates by e-mail.")
    assert (relation.relation, relation.kind) == ("", "undecided")


def test_a_queued_write_carries_its_related_memories(world):
    old = factory.make_memory(world.copilot, "VPN-4012 is fixed by client 5.2.1")
    same = factory.make_memory(world.copilot, "The roof terrace is closed to visitors")
    factory.make_memory(world.copilot, "The canteen serves lunch until 14:00")
    client = world.client("copilot")

    def post(text):
        body = {"scope": "agent", "text": text, "sources": [{"kind": "kb", "ref": "KB-7"}]}
        return client.post("/api/memory", body, format="json").json()

    body = post("VPN-4012 is fixed by client 5.2.3")
    assert body["status"] == "queued"
    related = client.get(f"/api/memory/{body['id']}").json()["related"]
    assert [(r["memory"], r["relation"]) for r in related] == [(old.pk, "contradiction")]
    assert "5.2.1" in related[0]["why"] and 0 < related[0]["score"] <= 1
    body = post("The roof terrace is open to visitors")
    related = client.get(f"/api/memory/{body['id']}").json()["related"]
    assert [(r["memory"], r["relation"]) for r in related] == [(same.pk, "contradiction")]


def test_related_memories_are_only_those_the_writer_may_read(world):
    other = factory.make_agent("other-agent")
    hidden = factory.make_memory(other, "VPN-4012 is fixed by client 5.2.1")  # other's self store
    shared = factory.make_memory(world.copilot, "VPN-4012 is fixed by client 5.2.0", store="shared")
    queued = factory.make_queued_memory(world.copilot, "VPN-4012 is fixed by client 5.2.3")
    found = related_for([queued], Principal.for_agent(world.copilot))[queued.pk]
    assert [r.memory.pk for r in found] == [shared.pk]
    assert hidden.pk not in {r.memory.pk for r in found}


def test_a_memory_it_supersedes_is_not_listed(world):
    old = factory.make_memory(world.copilot, "VPN-4012 is fixed by client 5.2.1")
    queued = factory.make_queued_memory(world.copilot, "VPN-4012 is fixed by client 5.2.3", supersedes=old)
    assert related_for([queued])[queued.pk] == []


def test_the_queue_never_offers_a_contradiction_as_a_near_duplicate(client, world):
    email = factory.make_memory(world.scribe, "The roof terrace is closed to visitors.", store="shared")
    phone = factory.make_queued_memory(world.scribe, "The roof terrace is open to visitors.", store="shared")
    factory.embed_all()
    a, b = (Memory.objects.get(pk=m.pk).embedding for m in (email, phone))
    assert (
        sum(x * y for x, y in zip(a, b, strict=True)) >= NEAR_COSINE
    )  # the vectors alone would call it a near-duplicate
    hints = queue_duplicate_hints([Memory.objects.get(pk=phone.pk)], None)
    assert hints[phone.pk].near == []
    client.force_login(world.reviewer)
    body = client.get("/review/").content.decode()
    card = body.split(f'id="memory-{phone.pk}"')[1].split("</article>")[0]
    assert 'class="dup' not in card and "Reject as duplicate" not in card


def test_a_page_of_several_owners_fetches_its_candidates_once_each_owner_reading_its_own(
    world, django_assert_num_queries
):
    other = factory.make_agent("other-agent")
    mine = factory.make_memory(world.copilot, "VPN-4012 is fixed by client 5.2.1")  # copilot's own store
    theirs = factory.make_memory(other, "VPN-4012 is fixed by client 5.2.2")  # other-agent's own store
    shared = factory.make_memory(world.scribe, "VPN-4012 is fixed by client 5.2.0", store="shared")
    queued = [
        factory.make_queued_memory(world.copilot, "VPN-4012 is fixed by client 5.2.3"),
        factory.make_queued_memory(other, "VPN-4012 is fixed by client 5.2.4"),
    ]
    memories = list(Memory.objects.filter(pk__in=[m.pk for m in queued]).select_related("owner"))
    # the candidates' statement, the stores each owner reads (two each), one fetch of the candidates
    with django_assert_num_queries(6):
        found = related_for(memories)
    assert {r.memory.pk for r in found[queued[0].pk]} == {mine.pk, shared.pk}
    assert {r.memory.pk for r in found[queued[1].pk]} == {theirs.pk, shared.pk}
    assert {r.relation for rs in found.values() for r in rs} == {CONTRADICTION}
