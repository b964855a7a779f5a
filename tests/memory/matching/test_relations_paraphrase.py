"""Paraphrases the duplicate rule reads as saying the same (issue 51: duplicate recall): an
acronym against the words it stands for, and a word against itself with a short prefix that
does not negate it. Written apart from the dev pairs' wording (memory-pairs-dev)."""

from memory.matching.paraphrase import prefixed
from memory.matching.relations import CONTRADICTION, DUPLICATE, classify


def test_an_acronym_says_the_words_it_stands_for():
    relation = classify("Ana is working from home every Friday.", "Ana is WFH every Friday.")
    assert relation.relation == DUPLICATE and relation.kind == "paraphrase"


def test_a_prefixed_word_says_the_word():
    assert (
        classify(
            "Send the signed invoice by email to finance.", "Signed invoices go to finance by mail."
        ).relation
        == DUPLICATE
    )
    assert (
        classify(
            "If the nightly upload fails, retry it after five minutes.",
            "When the nightly upload fails, try it again after 5 minutes.",
        ).relation
        == DUPLICATE
    )


def test_a_negating_prefix_or_a_short_word_is_no_match():
    assert prefixed("mail", {"email"}) and prefixed("retry", {"try"})
    assert not prefixed("lock", {"unlock"}) and not prefixed("active", {"inactive"})
    assert not prefixed("go", {"ego"})  # under three letters: too short to say anything


def test_an_opposite_still_wins_over_an_acronym():
    relation = classify("Ana is working from home every Friday.", "Ana works from the office every Friday.")
    assert relation.relation == CONTRADICTION and relation.kind == "antonym"


def test_a_word_against_its_negation_by_prefix_is_no_duplicate():
    """ "locked" / "unlocked" share every other word; they were answered as a duplicate. Now the
    rules leave the pair undecided (the model, when there is one, decides it)."""
    relation = classify("The vault door is locked at night.", "The vault door is unlocked at night.")
    assert relation.relation != DUPLICATE and relation.kind == "undecided"
