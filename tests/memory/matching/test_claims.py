"""The claim reader (memory.matching.claims) and the relations read from claims (issue 59):
made-up sentences, none from the labelled sets, and no sentence of these in the product."""

import pytest

from memory.matching.claims import opposed, read
from memory.matching.relations import CONTRADICTION, DUPLICATE, UNDECIDED, classify


def test_a_possessor_chain_says_whose_thing_it_is():
    (claim,) = read("Noor's sister's train leaves at 10:45.").claims
    assert claim.subject.head == "train"
    assert claim.subject.owners == ("noor", "sister")
    assert claim.attribute == "leave"
    assert claim.numbers == {"10:45"}
    assert claim.polarity


def test_ids_and_qualifiers_say_which_one():
    (claim,) = read("The store #41 licence renews in October.").claims
    assert claim.subject.head == "licence"
    assert {"store", "41"} <= claim.subject.which
    (winter,) = read("The winter opening hours start at 10am.").claims
    assert "winter" in winter.subject.which


def test_a_denial_and_the_time_it_holds_for_are_read():
    (claim,) = read("Mira doesn't drink coffee during the week.").claims
    assert not claim.polarity and claim.attribute == "drink" and "coffee" in claim.negated
    assert "the week" not in claim.when  # "the" names no period
    (last,) = read("Mira's present last year was a kite.").claims
    assert "last year" in last.when


def test_what_it_cannot_read_is_undecided():
    assert read("—").undecided
    assert classify("Blue. Green.", "Green. Blue!").kind in ("case", UNDECIDED, "")


def test_opposites_come_from_wordnet():
    assert opposed("open", "closed") and opposed("allow", "forbid") and opposed("rise", "fall")
    assert not opposed("remove", "move") and not opposed("phone", "email")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # another relative of the same person
        ("Noor's train leaves at 08:15.", "Noor's sister's train leaves at 10:45."),
        # another store, whatever else changes
        ("The store #14 licence renews in August.", "The store #41 licence renews in October."),
        # another verb, no general resource opposes them
        ("Remove the old printer.", "Move the old printer."),
        # the person, and someone of theirs
        ("Tobias Wren is on leave until May.", "Tobias Wren's deputy is on leave until May."),
        # another qualifier on each side
        ("The garden gate code is 4471.", "The garage gate code is 9902."),
        # another period
        ("Our electricity bill this year was 900 EUR.", "Our electricity bill last year was 700 EUR."),
    ],
)
def test_another_one_is_never_a_duplicate_or_a_contradiction(a, b):
    for x, y in ((a, b), (b, a)):
        assert classify(x, y).relation == "", classify(x, y)


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        ("Noor's train leaves at 08:15.", "Noor's train leaves at 08:45.", "number"),
        (
            "The depot accepts returns on Sundays.",
            "The depot does not accept returns on Sundays.",
            "negation",
        ),
        ("The side entrance is open after 18:00.", "The side entrance is closed after 18:00.", "antonym"),
    ],
)
def test_a_real_contradiction_is_found(a, b, kind):
    relation = classify(a, b)
    assert (relation.relation, relation.kind) == (CONTRADICTION, kind), relation
    assert len(relation.why) < 80


def test_a_paraphrase_is_a_duplicate():
    relation = classify("The depot closes at 5pm on Fridays.", "On Fridays the depot closes at 17:00.")
    assert relation.relation == DUPLICATE, relation


def test_two_peoples_private_memories_relate_only_about_one_named_subject(world):
    from knowledge.models import Channel
    from memory.matching.relations import related_for
    from tests import factory

    dm_bob = factory.make_channel("dm-bob", kind=Channel.KIND_DM, person=world.bob, agent=world.copilot)
    for channel in (world.dm_alice, dm_bob):
        factory.make_conversation(world.copilot, channel)

    def row(text, store, status):
        return factory.make_memory_row(world.copilot, text, store=store, status=status)

    row("My train leaves at 08:45.", "private:alice", "active")
    bobs = row("My train leaves at 08:15.", "private:bob", "queued")
    assert related_for([bobs])[bobs.pk] == []  # "my" train: each person's own
    about = row("Kestrel Hall's boiler is serviced in May.", "private:alice", "active")
    queued = row("Kestrel Hall's boiler is serviced in June.", "private:bob", "queued")
    assert [r.memory.pk for r in related_for([queued])[queued.pk]] == [about.pk]
