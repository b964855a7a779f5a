"""Duplicates where people and agents meet memory: an agent's exact duplicate answered with the
memory that already says it, the review queue's duplicate hints, and near-identical items
inside one recall answer.

- exact: the same text once case and spacing are set aside (`NORM`, served by the partial
  index `memory_live_norm_idx` on live memories), or the same key and value;
- near (queue): vectors at cosine ≥ NEAR_COSINE and the same numbers and negation
  (`same_facts`), and never a pair the relation finder calls a contradiction
  (memory.matching.relations: "by phone only" / "by e-mail only" is no near-duplicate) — chosen on the labelled pairs of `bench/data/review_duplicate_pairs.json`
  by `python -m bench.review_duplicates_eval`: precision 0.89, recall 0.85 (docs/PERFORMANCE.md,
  "Duplicate hints"); the vector alone never reached precision 0.85 at a useful recall;
- near (inside one answer, where vectors are not loaded): key terms nearly the same
  (memory.matching.terms.near_identical), the same test consolidation uses for its candidates.

Only live memories (queued or active) count, and only in stores the reader may see."""

import json
import re
from dataclasses import dataclass, field

from django.db import connection

from knowledge import access
from knowledge.models import Memory
from knowledge.principal import Principal
from memory.lifecycle import hints
from memory.matching.relations import CONTRADICTION, DUPLICATE, Related, classify, read
from memory.recall.routes import execute_all

LIVE = (Memory.QUEUED, Memory.ACTIVE)
NORM = r"md5(lower(regexp_replace(btrim({0}.text), '\s+', ' ', 'g')))"
NEAR_COSINE = 0.76
NEAR_PER_MEMORY = 3
NEAR_EF_SEARCH = 16


def exact_duplicate_for_write(*, owner, store: str, tier: str, text: str, key: str, value) -> Memory | None:
    """The live memory an agent's new write would repeat exactly, in the same store and tier
    (and, in an owner-only store, of the same owner): same folded text (unless both are keyed,
    under different keys), or same key and value.
    Oldest first, so repeated writes keep answering with the same memory. (A working note that
    restates a long-term fact is not a duplicate of it: it expires.)"""
    where, scope = _exact_scope(owner, store, "%s")
    keyed = bool(key and value is not None)
    sql = _exact_sql(where, text="%s", key="%s", value="%s::jsonb" if keyed else None)
    params = [*scope, tier, text, key or "", key or ""]
    if keyed:
        params += [*scope, tier, key, json.dumps(value)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    return Memory.objects.select_related("owner").prefetch_related("sources").get(pk=row[0])


def _exact_scope(owner, store: str, tier: str) -> tuple[str, list]:
    """Where an exact duplicate may lie — the same store and tier (`tier` an SQL expression), and
    in an owner-only store the same owner — and the parameters of that condition."""
    where = f"m.store = %s AND m.tier = {tier} AND m.status IN ('queued', 'active')"
    scope: list = [store]
    if store.startswith(access.OWNER_ONLY_PREFIXES):
        # `+ 0`: not an index condition, so the probe is the norm index's. Planned with
        # statistics from before an owner had memories, the (owner, store, status) index looks
        # like one row and the planner folds the text of every memory the owner has, per write
        # (20 ms a write, growing, in an import's second 1,000 memories).
        where = where.replace("m.tier", "m.owner_id + 0 = %s AND m.tier", 1)
        scope.append(owner.pk)
    return where, scope


def _exact_sql(where: str, *, text: str, key: str, value: str | None, keyed: str = "") -> str:
    """THE exact-duplicate rule for one write as SQL: the oldest live memory (id) `where` says
    with the same folded text (unless both are keyed, under different keys), or, given `value`,
    the same key and value. `text`, `key`, `value` are SQL expressions (placeholders, or the
    columns of many writes checked at once); `keyed`, a condition the key-and-value side needs."""
    table = Memory._meta.db_table
    # Each side of the UNION is one index probe (memory_live_norm_idx; the key index): an OR of
    # the two would read every live memory of the store.
    sql = (
        f"SELECT m.id, m.created_at FROM {table} m WHERE {where} "
        f"AND {NORM.format('m')} = md5(lower(regexp_replace(btrim({text}), '\\s+', ' ', 'g')))"
        # Two keyed memories with different keys are two facts, whatever their text (a store
        # of key -> value items may hold the same value under many keys).
        f" AND ({key} = '' OR COALESCE(m.key, '') IN ('', {key}))"
    )
    if value is not None:
        sql += (
            f" UNION SELECT m.id, m.created_at FROM {table} m WHERE {keyed}{where}"
            f" AND m.key = {key} AND m.value = {value}"
        )
    return f"SELECT id FROM ({sql}) d ORDER BY created_at, id LIMIT 1"


def exact_duplicates_for_writes(*, owner, writes: list[tuple[str, str, str, str, object]]) -> list:
    """exact_duplicate_for_write for many writes of one owner at once — (store, tier, text, key,
    value) each, in one store or several (an import of many people's private stores) — in one
    statement (an index probe per write). For each write, in order: (the id of the live memory it
    repeats or None, its folded text's hash as the rule compares it), so a caller can tell which
    writes of the batch repeat each other."""
    if not writes:
        return []
    # _exact_scope per write: the store and tier, and in an owner-only store the same owner
    # (`+ 0` for the reason given there).
    where = (
        "m.store = w.store AND m.tier = w.tier AND (NOT w.owner_only OR m.owner_id + 0 = %s) "
        "AND m.status IN ('queued', 'active')"
    )
    probe = _exact_sql(
        where, text="w.text", key="w.key", value="w.value", keyed="w.key <> '' AND w.value IS NOT NULL AND "
    )
    sql = (
        f"SELECT w.i, d.id, {NORM.format('w')} FROM unnest(%s::int[], %s::text[], %s::bool[], %s::text[], "
        "%s::text[], %s::text[], %s::text[]::jsonb[]) AS w(i, store, owner_only, tier, text, key, value) "
        f"LEFT JOIN LATERAL ({probe}) d ON true ORDER BY w.i"
    )
    stores, tiers, texts, keys, values = (list(c) for c in zip(*writes, strict=True))
    params = [
        list(range(len(writes))),
        stores,
        [store.startswith(access.OWNER_ONLY_PREFIXES) for store in stores],
        tiers,
        texts,
        [k or "" for k in keys],
        # only a keyed write's value takes part in the rule (and JSON costs to quote)
        [None if not k or v is None else json.dumps(v) for k, v in zip(keys, values, strict=True)],
        owner.pk,
        owner.pk,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(found, norm) for _, found, norm in cursor.fetchall()]


@dataclass
class DuplicateHints:
    exact: list[Memory] = field(default_factory=list)
    near: list[tuple[Memory, float]] = field(default_factory=list)  # (memory, cosine)
    dismissed: set[int] = field(default_factory=set)  # the others a reviewer called unrelated to it
    queued: list = field(default_factory=list)  # Related: near queued memories it contradicts


def queue_duplicate_hints(memories: list[Memory], principal: Principal | None) -> dict[int, DuplicateHints]:
    """For each queued memory: the live memories it repeats exactly and those whose vectors are
    near it, among memories `principal` may read. Two statements for the whole page: an index
    lookup per card for the exact ones, one nearest-neighbour probe per card (LATERAL, HNSW) for
    the near ones."""
    if not memories:
        return {}
    ids = [m.pk for m in memories]
    table = Memory._meta.db_table
    # One index probe per card on each side (a LATERAL UNION: joined with an OR, or as a plain
    # join, the planner read every live memory and folded each text — 28 s for a page of 100
    # among 10k memories, 2–8 ms this way; bench/bench_review_queue.py).
    exact_sql = f"""
        SELECT q.id, e.id, NULL::float FROM {table} q, LATERAL (
            SELECT m.id FROM {table} m
            WHERE m.store = q.store AND m.status IN ('queued', 'active')
              AND {NORM.format("m")} = {NORM.format("q")} AND m.id <> q.id
            UNION
            SELECT m.id FROM {table} m
            WHERE q.key <> '' AND q.value IS NOT NULL AND m.key = q.key AND m.store = q.store
              AND m.value = q.value AND m.status IN ('queued', 'active') AND m.id <> q.id) e
        WHERE q.id = ANY(%s)"""
    near_sql = f"""
        SELECT q.id, n.id, n.sim FROM {table} q, LATERAL (
            SELECT m.id, 1 - (m.embedding <=> q.embedding) AS sim FROM {table} m
            WHERE m.id <> q.id AND m.status IN ('queued', 'active') AND m.embedding IS NOT NULL
            ORDER BY m.embedding <=> q.embedding LIMIT %s) n
        WHERE q.id = ANY(%s) AND q.embedding IS NOT NULL AND n.sim >= %s"""
    # Both in one round trip. A hint needs the few nearest, not an exhaustive search: a small
    # HNSW candidate list returned the same hints at a third of the time on the bench page.
    # With them, the same round trip: the pairs reviewers dismissed as unrelated.
    exact, near, dismissed = execute_all(
        [(exact_sql, [ids]), (near_sql, [NEAR_PER_MEMORY + 1, ids, NEAR_COSINE]), hints.dismissed_sql(ids)],
        f"SET LOCAL jit = off; SET LOCAL hnsw.ef_search = {NEAR_EF_SEARCH}",
    )
    others = {row[1] for row in exact} | {row[1] for row in near}
    qs = Memory.objects.filter(pk__in=others).select_related("owner")
    if principal is not None:
        qs = qs.filter(access.memory_readable_q(principal))
    rows = {m.pk: m for m in qs.defer("embedding")}
    found = {i: DuplicateHints() for i in ids}
    for low, high in dismissed:
        if low in found:
            found[low].dismissed.add(high)
        if high in found:
            found[high].dismissed.add(low)
    exact_pairs = set()
    for q, m, _ in sorted(exact):
        if m in rows and m not in found[q].dismissed:
            found[q].exact.append(rows[m])
            exact_pairs.add((q, m))
    by_id = {m.pk: m for m in memories}
    readings: dict[int, object] = {}  # each text read once, however many pairs it is in

    def relation(memory: Memory, other: Memory):
        for m in (memory, other):
            if m.pk not in readings:
                readings[m.pk] = read(m.text)
        return classify(readings[other.pk], readings[memory.pk])

    # A queued neighbour is seen by its writer and people with a role: the cards' readers.
    queued_seen = principal is None or principal.is_reviewer
    for q, m, sim in sorted(near, key=lambda r: (r[0], -r[2])):
        if m not in rows or (q, m) in exact_pairs or m in found[q].dismissed:
            continue
        memory, other = by_id[q], rows[m]
        both_queued = queued_seen and other.status == Memory.QUEUED
        facts = len(found[q].near) < NEAR_PER_MEMORY and same_facts(memory.text, other.text)
        if not (both_queued or facts):
            continue
        said = relation(memory, other)
        if both_queued and said.relation == CONTRADICTION:
            # two queued memories that contradict each other: hinted on both cards (each card's
            # own probe finds the other) before either is approved
            found[q].queued.append(Related(other, CONTRADICTION, said.kind, said.score, said.why))
        elif facts and _near_relation(memory, other, said.relation):
            found[q].near.append((other, round(sim, 3)))
    return found


def _near_relation(memory: Memory, other: Memory, relation: str) -> bool:
    """Whether a near vector may be offered as a near-duplicate of `memory`, given the relation
    finder's `relation` of the pair: never a contradiction, and across two people's private
    stores only a duplicate (another person's sentence about their own train is not a duplicate
    of this one's, however near the vectors)."""
    if hints.across_people(memory, other) or hints.across_people(other, memory):
        return relation == DUPLICATE
    return relation != CONTRADICTION


NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
NEGATION = re.compile(r"\b(?:not|no|never|none|nobody|nothing|without|cannot)\b|n't\b", re.IGNORECASE)


def same_facts(a: str, b: str) -> bool:
    """The code rule a near-duplicate hint must pass besides its vector: the same numbers, and
    both or neither negated (on the labelled pairs, "30 days" / "60 days" scored 0.97)."""
    if sorted(NUMBER.findall(a)) != sorted(NUMBER.findall(b)):
        return False
    return bool(NEGATION.search(a)) == bool(NEGATION.search(b))
