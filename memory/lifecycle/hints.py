"""The review queue's hints as reviewers judge them (issue 59.3): a hint — a duplicate or a
contradiction the queue shows between two memories — dismissed as **unrelated** is remembered
(memory.models.HintVerdict) so the pair is not flagged again, on the card or in an approval; a
hint acted on (rejected as that duplicate, the contradiction decided) is counted as confirmed;
the counts per hint are the hints' precision as reviewers see it (`hint_verdict_counts`, on the
Status tab and GET /api/status).

Besides: which memories a decision may touch across people (`across_people`: never another
person's private store), and contradictions between two *queued* memories, so both cards say so
before either is approved (`queued_contradictions`: the relation finder's `classify` on the
queued memories that share the most words with each card, candidates found in the card page's
one round trip of hint statements)."""

import datetime
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Q

from knowledge.audit.services import audit_batch, audit_record
from knowledge.errors import Invalid, NotFound
from knowledge.models import Agent, Memory
from knowledge.principal import Principal
from memory.matching.relations import CONTRADICTION, Related, classify, read
from memory.models import HintVerdict

PRIVATE = "private:"
HINTS = [h for h, _ in HintVerdict.HINTS]
QUEUED_CANDIDATES = 5  # queued memories sharing the most words with a card, classified against it
QUEUED_MATCHED = 200  # of at most this many matches (as the finder's candidates)


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
        defaults={"hint": hint, "verdict": verdict, "actor_kind": actor.kind, "actor_name": actor.name},
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


def queued_candidates_sql(ids: list[int]) -> tuple[str, list]:
    """For each of `ids`, the queued loose memories (no entry block, no skill lesson) sharing the
    most words with it (its stored `search` lexemes, an OR query on the GIN index, ranked among
    at most QUEUED_MATCHED matches), with what a card shows of them, as rows for
    `queued_candidates`: a statement for the card page's one round trip of hint statements, so
    the page reads them with no statement of its own."""
    table, agents = Memory._meta.db_table, Agent._meta.db_table
    sql = f"""
        SELECT q.id, m.id, m.text, m.status, m.store, m.owner_id, a.name, m.created_at FROM {table} q
        CROSS JOIN LATERAL (SELECT to_tsquery('simple', string_agg(quote_literal(l), ' | ')) AS tq
                            FROM unnest(tsvector_to_array(q.search)) l) kw
        CROSS JOIN LATERAL (
            SELECT h.id FROM (
                SELECT m.id, m.search FROM {table} m
                WHERE kw.tq IS NOT NULL AND m.search @@ kw.tq AND m.status = 'queued' AND m.id <> q.id
                  AND m.entry_id IS NULL AND m.skill_id IS NULL
                LIMIT {QUEUED_MATCHED}) h
            ORDER BY ts_rank(h.search, kw.tq) DESC, h.id LIMIT {QUEUED_CANDIDATES}) c
        JOIN {table} m ON m.id = c.id JOIN {agents} a ON a.id = m.owner_id
        WHERE q.id = ANY(%s)"""
    return sql, [ids]


@dataclass(frozen=True)
class QueuedCandidate:
    """What a card shows of a queued memory another card's memory may contradict (read, never
    written: not a memory row)."""

    pk: int
    text: str
    status: str
    store: str
    owner: Agent
    created_at: datetime.datetime
    entry_id: None = None
    skill_id: None = None


def queued_candidates(rows: list[tuple]) -> tuple[list[tuple[int, int]], dict[int, QueuedCandidate]]:
    """queued_candidates_sql's rows as (card id, candidate id) pairs and the candidates."""
    found: dict[int, QueuedCandidate] = {}
    for _, pk, text, status, store, owner_id, owner_name, created_at in rows:
        if pk not in found:
            found[pk] = QueuedCandidate(
                pk, text, status, store, Agent(pk=owner_id, name=owner_name), created_at
            )
    return [(row[0], row[1]) for row in rows], found


def queued_contradictions(
    memories: list[Memory], candidates: list[tuple[int, int]], rows: dict[int, Memory]
) -> dict[int, list[Related]]:
    """For each of `memories` (queued), the queued memories among its `candidates` (pairs of
    (memory id, candidate id); `rows` the candidates) that the relation finder's rules call a
    contradiction of it — each pair read once, in either order, so each card of two such
    memories names the other."""
    by_id = {m.pk: m for m in memories}
    pairs = {pair(q, c) for q, c in candidates if q in by_id and (c in rows or c in by_id)}
    readings: dict[int, object] = {}
    out: dict[int, list[Related]] = {m.pk: [] for m in memories}
    for low, high in sorted(pairs):
        a, b = (by_id.get(low) or rows.get(low)), (by_id.get(high) or rows.get(high))
        if a.status != Memory.QUEUED or b.status != Memory.QUEUED:
            continue
        for m in (a, b):
            if m.pk not in readings:
                readings[m.pk] = read(m.text)
        relation = classify(readings[a.pk], readings[b.pk])
        if relation.relation != CONTRADICTION:
            continue
        for mine, theirs in ((a, b), (b, a)):
            if mine.pk in out:
                out[mine.pk].append(
                    Related(theirs, CONTRADICTION, relation.kind, relation.score, relation.why)
                )
    return out


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
