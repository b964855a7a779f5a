"""Paraphrases the duplicate rule reads as saying the same (issue 51: duplicate recall): an
acronym against the words it stands for; a prefixed word is another word (issue 59). Written
apart from the dev pairs' wording (memory-pairs-dev)."""

from memory.matching.relations import CONTRADICTION, DUPLICATE, classify


def test_an_acronym_says_the_words_it_stands_for():
    relation = classify("Ana is working from home every Friday.", "Ana is WFH every Friday.")
    assert relation.relation == DUPLICATE and relation.kind == "paraphrase"


def test_a_word_with_a_prefix_is_another_word():
    """remove / move, replace / place: a prefix makes another word, whatever letters it shares
    (the old rule counted a short non-negating prefix as the word)."""
    assert classify("Remove the old printer from room 4.", "Move the old printer from room 4.").relation == ""


def test_an_acronym_makes_no_duplicate_of_another_place():
    relation = classify("Ana is working from home every Friday.", "Ana works from the office every Friday.")
    assert relation.relation != DUPLICATE


def test_a_word_against_its_negation_by_prefix_is_no_duplicate():
    """ "locked" / "unlocked" share every other word; they were answered as a duplicate. WordNet
    gives them as opposites: a contradiction."""
    relation = classify("The vault door is locked at night.", "The vault door is unlocked at night.")
    assert (relation.relation, relation.kind) == (CONTRADICTION, "antonym")
