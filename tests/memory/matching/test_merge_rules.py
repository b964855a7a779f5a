"""Merges keep meaning (issue 51): a merge is refused when its originals contradict each other,
or when it drops a negation, swaps a number, turns a preference or swaps an owner."""

import pytest

from memory.matching.rules import merge_breach


@pytest.mark.parametrize(
    ("originals", "merged", "said"),
    [
        (
            ["Ravi does not eat pork.", "Ravi doesn't eat pork at team dinners."],
            "Ravi eats pork at team dinners.",
            "it changes what memory 1 says",
        ),
        (
            ["The lab closes at 18:00 on weekdays.", "The lab closes at 6pm on weekdays; the café at 14:00."],
            "The lab closes at 14:00 on weekdays.",
            "it changes what memory 1 says",
        ),
        (
            ["Ingrid likes aisle seats on trains.", "Ingrid likes an aisle seat when she takes the train."],
            "Ingrid dislikes aisle seats on trains.",
            "it changes what memory 1 says",
        ),
        (
            ["The lab inventory is owned by Ingrid Holm.", "Ingrid Holm owns the lab inventory."],
            "Olaf Berg owns the lab inventory.",
            "",  # Olaf Berg is in no original: refused as naming what no original says
        ),
    ],
    ids=["negation dropped", "number swapped", "preference swapped", "owner swapped for a stranger"],
)
def test_a_merge_that_changes_the_meaning_is_refused(originals, merged, said):
    why = merge_breach(merged, originals)
    assert why, merged
    assert said in why


def test_an_owner_swapped_for_one_the_originals_name_is_refused():
    originals = [
        "Ingrid Holm owns the lab inventory; Olaf Berg orders supplies.",
        "Ingrid Holm owns the lab inventory.",
    ]
    why = merge_breach("Olaf Berg owns the lab inventory and orders supplies.", originals)
    assert "it changes what memory 2 says" in why and "same role" in why, why


def test_originals_that_contradict_each_other_are_never_merged():
    originals = ["The roof terrace is open to visitors.", "The roof terrace is closed to visitors."]
    why = merge_breach("The roof terrace is open to visitors.", originals)
    assert why.startswith("the originals disagree")


def test_a_faithful_merge_still_passes():
    originals = ["Ravi does not eat pork.", "Ravi doesn't eat pork at team dinners."]
    assert merge_breach("Ravi does not eat pork, team dinners included.", originals) == ""


def test_consolidation_never_groups_contradicting_memories():
    from memory.consolidation import near_duplicate_groups

    rows = [
        {"id": 1, "text": "The roof terrace is open to visitors."},
        {"id": 2, "text": "The roof terrace is closed to visitors."},
        {"id": 3, "text": "the roof terrace is  open to visitors"},
    ]
    assert near_duplicate_groups(rows) == [[1, 3]]


def test_the_reconcilers_same_statement_guard_never_passes_a_contradiction():
    from memory.reconciler.dedup import same_statement_guard

    a, b = (
        "The Kraków office is open on Saturdays.",
        "The Kraków office stays closed every Saturday during winter.",
    )
    assert not same_statement_guard(a, b)
    assert same_statement_guard(
        "The Kraków office is open on Saturdays.", "On Saturdays the Kraków office is open."
    )
