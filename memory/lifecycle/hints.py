"""The review queue's hints as reviewers judge them (issue 59.3): a hint — a duplicate or a
contradiction the queue shows between two memories — dismissed as **unrelated** is remembered
(memory.models.HintVerdict) so the pair is not flagged again, on the card or in an approval; a
hint acted on (rejected as that duplicate, the contradiction decided) is counted as confirmed;
the counts per hint are the hints' precision as reviewers see it (`hint_verdict_counts`, on the
Status tab and GET /api/status).

Besides: which memories a decision may touch across people (`across_people`: never another
person's private store). (Contradictions between two queued memories are found with the
near-duplicate hints: duplicates.queue_duplicate_hints.)"""

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Count, Q

from knowledge.audit.services import audit_batch, audit_record
from knowledge.errors import Invalid, NotFound
from knowledge.models import Memory
from knowledge.principal import Principal
from memory.models import HintVerdict

PRIVATE = "private:"
HINTS = [h for h, _ in HintVerdict.HINTS]


def pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def across_people(memory: Memory, other: Memory) -> bool:
    """Whether `other` lies in the private store of another person than `memory`'s: a
    `private:<person>` store is that one person's, and a memory outside one has no person. A
    decision on `memory` never retires or closes such a memory, whatever a hint says."""
    return other.store.startswith(PRIVATE) and other.store != memory.store


def _record(actor: Principal, memory_id: int, other_id: int, hint: str, verdict: str) -> HintVerdict:
    low, high = pair(memory_id, other_id)
    row, _ = HintVerdict.objects.update_or_create(
        low_id=low,
        high_id=high,
        defaults={"hint": hint, "verdict": verdict, "actor_kind": actor.kind_label, "actor_name": actor.name},
    )
    return row


def hint_dismiss(*, actor: Principal, memory_id: int, other_id: int, hint: str) -> HintVerdict:
    """Dismiss the `hint` the queue showed between two memories as unrelated: remembered, so the
    pair is not flagged again (its card, the API's `related`, an approval's contradiction check),
    counted for the hint's precision, and audited (memory.hint_dismissed) in one transaction.
    Invalid for an unknown hint or a memory paired with itself; NotFound for a missing memory."""
    if hint not in HINTS:
        raise Invalid({"hint": [f"Use one of {', '.join(HINTS)}."]})
    if memory_id == other_id:
        raise Invalid({"other": ["A memory is not a hint of itself."]})
    with audit_batch(), transaction.atomic():
        rows = {m.pk: m for m in Memory.objects.select_related("owner").filter(pk__in=[memory_id, other_id])}
        missing = [i for i in (memory_id, other_id) if i not in rows]
        if missing:
            raise NotFound(f"There is no memory {missing[0]}.")
        verdict = _record(actor, memory_id, other_id, hint, HintVerdict.UNRELATED)
        memory = rows[memory_id]
        audit_record(
            "memory.hint_dismissed",
            actor=actor,
            store=memory.store,
            owner=memory.owner.name,
            object_type="memory",
            object_ids=[memory_id, other_id],
            reason=f"the {hint} hint between #{memory_id} and #{other_id} is unrelated",
            data={"hint": hint, "memory": memory_id, "other": other_id, "verdict": HintVerdict.UNRELATED},
        )
    return verdict


def hints_confirm(*, actor: Principal, pairs: Iterable[tuple[int, int, str]]) -> None:
    """Count hints a reviewer acted on as confirmed: (memory, other, hint) each. Inside the
    decision's transaction (it is the decision's audit event that says what was done)."""
    for memory_id, other_id, hint in pairs:
        _record(actor, memory_id, other_id, hint, HintVerdict.CONFIRMED)


def dismissed_sql(ids: list[int]) -> tuple[str, list]:
    """The dismissed pairs that involve any of `ids`, as (low, high) rows: a statement for the
    card page's round trip of hint statements."""
    table = HintVerdict._meta.db_table
    return (
        f"SELECT low_id, high_id FROM {table} WHERE verdict = %s AND (low_id = ANY(%s) OR high_id = ANY(%s))",
        [HintVerdict.UNRELATED, ids, ids],
    )


def dismissed_among(ids: list[int]) -> set[tuple[int, int]]:
    """The dismissed pairs (low, high) that involve any of `ids` (one query)."""
    if not ids:
        return set()
    return set(
        HintVerdict.objects.filter(
            Q(low_id__in=ids) | Q(high_id__in=ids), verdict=HintVerdict.UNRELATED
        ).values_list("low_id", "high_id")
    )


def hint_verdict_counts() -> dict[str, dict[str, int | float | None]]:
    """Per hint (duplicate, exact-duplicate, near-duplicate, contradiction): how many pairs
    reviewers dismissed as unrelated and how many they confirmed, and the precision that gives
    (confirmed / both; None before any verdict)."""
    counts = {hint: {HintVerdict.UNRELATED: 0, HintVerdict.CONFIRMED: 0} for hint in HINTS}
    for row in HintVerdict.objects.values("hint", "verdict").annotate(n=Count("id")).order_by():
        counts.setdefault(row["hint"], {HintVerdict.UNRELATED: 0, HintVerdict.CONFIRMED: 0})[
            row["verdict"]
        ] = row["n"]
    for said in counts.values():
        judged = said[HintVerdict.UNRELATED] + said[HintVerdict.CONFIRMED]
        said["precision"] = round(said[HintVerdict.CONFIRMED] / judged, 3) if judged else None
    return counts
