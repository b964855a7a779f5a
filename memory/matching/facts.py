"""When two memories about the same key disagree, and when their validity windows meet: the
conflict rule activation, consolidation and recall's one-answer rule share."""

from knowledge.models import Memory


def contradicts(a: Memory, b: Memory) -> bool:
    """Whether two memories with the same key say different things: different values, or (for
    memories without a value) different text once case and spacing are set aside."""
    if a.value is not None or b.value is not None:
        return a.value != b.value
    return " ".join(a.text.split()).casefold() != " ".join(b.text.split()).casefold()


def windows_overlap(a_from, a_to, b_from, b_to) -> bool:
    """Whether two validity windows [from, to) overlap; an open end is unbounded."""
    return (a_to is None or b_from is None or b_from < a_to) and (
        b_to is None or a_from is None or a_from < b_to
    )
