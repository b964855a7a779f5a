"""Finding what a consolidation run changes, per store and category of active long-term
memories (semantic and procedural; entry blocks and memories in an open plan are left alone):

1. duplicates — same text (case and whitespace folded), key and value: the newest is kept (a
   pinned one first) and the others fold into it. Found set-wise in SQL.
2. same-key conflicts — one key, different values, per store: recency × confidence ×
   source-kind weight picks the winner (a pinned memory always wins); the optional LLM arbiter
   (BRAIN_CONFLICT_ARBITER) may pick instead.
3. near-duplicates — key terms mostly overlap (and, with vectors on both, the vectors are
   close): the light model merges each group into one statement keeping every distinct fact.
4. summaries — a store/category still holding more than BRAIN_CONSOLIDATION_SUMMARY_OVER
   memories gets its oldest summarised into one.

A memory takes part in at most one change per run. Steps 3 and 4 (and the arbiter) need the
model; without a usable one they are skipped and the run's notes say why."""

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from knowledge.models import Memory, MemorySource
from memory.consolidation.model import MERGE_SYSTEM, SUMMARY_SYSTEM, ModelGate
from memory.lifecycle.selectors import conflict_pairs
from memory.matching.facts import windows_overlap
from memory.matching.relations import CONTRADICTION, classify
from memory.matching.terms import key_terms, overlap
from memory.models import ConsolidationGroup, ConsolidationItem, ConsolidationPlan

LONG_TERM = (Memory.SEMANTIC, Memory.PROCEDURAL)

# Near-duplicates: share of key terms two memories have in common (Dice: 2·|A∩B| / (|A|+|B|)),
# and cosine similarity when both have vectors.
TERM_OVERLAP = 0.65
VECTOR_CLOSE = 0.75  # with vectors: overlap ≥ TERM_OVERLAP and cosine ≥ VECTOR_CLOSE, or …
VECTOR_NEAR_SAME = 0.9  # … cosine ≥ VECTOR_NEAR_SAME and overlap ≥ LOOSE_TERM_OVERLAP
LOOSE_TERM_OVERLAP = 0.35
MAX_GROUP = 12  # memories one model merge may read
SUMMARY_BATCH = 50  # oldest memories one summary may read

# Conflicts: how much a memory's best source counts (its source weight): what an owning system
# recorded outweighs curated knowledge, which outweighs what was said.
SOURCE_WEIGHTS = {
    "ticket": 1.0,
    "kb": 1.0,
    "record": 1.0,
    "entry": 0.9,
    "material": 0.9,
    "message": 0.8,
    "conversation": 0.8,
    "memory": 0.7,
}
NO_SOURCE_WEIGHT = 0.6
RECENCY_HALF_LIFE_DAYS = 30.0


@dataclass
class Change:
    """One change found by a run (becomes a ConsolidationGroup)."""

    kind: str
    owner_id: int
    store: str
    category: str
    folds: list[int]
    keep: int | None = None  # duplicate survivor, conflict winner
    key: str = ""
    merged_text: str = ""  # near-duplicate merge or summary, from the model
    reason: str = ""
    data: dict = field(default_factory=dict)  # what the change adds besides memories (sources, links)

    @property
    def memory_ids(self) -> list[int]:
        return ([self.keep] if self.keep else []) + list(self.folds)


@dataclass
class Findings:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict = field(default_factory=lambda: defaultdict(int))
    deferred: str = ""  # why the model work waits for the server (an outage), "" when it does not

    def used(self) -> set[int]:
        return {i for c in self.changes for i in c.memory_ids}


# --- what may take part -------------------------------------------------------------------------


def _eligible_sql(*, owner_id, store, exclude) -> tuple[str, list]:
    mem = Memory._meta.db_table
    item, plan = ConsolidationItem._meta.db_table, ConsolidationPlan._meta.db_table
    where = [
        "m.status = 'active'",
        "m.tier IN ('semantic', 'procedural')",
        "m.entry_id IS NULL",
        # Skill lessons are curated in their overlay (near-duplicates are refused or revised there).
        "m.skill_id IS NULL",
        f"""NOT EXISTS (SELECT 1 FROM {item} i JOIN {plan} p ON p.id = i.plan_id
            WHERE i.memory_id = m.id AND p.state IN ('running', 'proposed'))""",
    ]
    params: list = []
    if owner_id is not None:
        where.append("m.owner_id = %s")
        params.append(owner_id)
    if store:
        where.append("m.store = %s")
        params.append(store)
    if exclude:
        where.append("NOT (m.id = ANY(%s))")
        params.append(list(exclude))
    return f"FROM {mem} m WHERE " + " AND ".join(where), params


NORM = r"lower(regexp_replace(btrim(m.text), '\s+', ' ', 'g'))"


def find_duplicates(findings: Findings, *, owner_id=None, store="") -> None:
    """Exact duplicates after case and whitespace folding, in one SQL statement."""
    base, params = _eligible_sql(owner_id=owner_id, store=store, exclude=())
    sql = f"""
        WITH c AS (
            SELECT m.id, m.owner_id, m.store, m.category, m.pinned, m.created_at,
                   {NORM} AS norm, m.key, coalesce(m.value::text, '') AS val
            {base}
        ), r AS (
            SELECT id, owner_id, store, category, pinned,
                   row_number() OVER w AS rn, first_value(id) OVER w AS keep_id,
                   count(*) OVER (PARTITION BY owner_id, store, category, norm, key, val) AS n
            FROM c
            WINDOW w AS (PARTITION BY owner_id, store, category, norm, key, val
                         ORDER BY pinned DESC, created_at DESC, id DESC)
        )
        SELECT owner_id, store, category, keep_id,
               array_agg(id ORDER BY id) FILTER (WHERE rn > 1 AND NOT pinned)
        FROM r WHERE n > 1
        GROUP BY owner_id, store, category, keep_id
        ORDER BY owner_id, store, category, keep_id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    for owner, store_, category, keep, folds in rows:
        if not folds:
            continue
        findings.changes.append(
            Change(
                kind=ConsolidationGroup.DUPLICATE,
                owner_id=owner,
                store=store_,
                category=category,
                keep=keep,
                folds=folds,
            )
        )
        findings.counts["duplicate_groups"] += 1
        findings.counts["duplicates_folded"] += len(folds)


def source_weight(kinds) -> float:
    return max((SOURCE_WEIGHTS.get(k, NO_SOURCE_WEIGHT) for k in kinds), default=NO_SOURCE_WEIGHT)


def conflict_score(*, confidence: float, created_at, kinds, now) -> float:
    """recency × confidence × source weight (how a same-key conflict is resolved)."""
    age_days = max(0.0, (now - created_at).total_seconds() / 86400)
    recency = 0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS)
    return recency * confidence * source_weight(kinds)


def find_conflicts(
    findings: Findings, *, owner_id=None, store="", now=None, model: "ModelGate", arbiter: bool | None = None
) -> None:
    """Same key, different values: the loser(s) fold into the winner. `arbiter` (default: the
    BRAIN_CONFLICT_ARBITER setting) lets `model.arbitrate` pick the winner."""
    now = now or timezone.now()
    base, params = _eligible_sql(owner_id=owner_id, store=store, exclude=findings.used())
    sql = f"""
        SELECT m.owner_id, m.store, m.key, array_agg(m.id ORDER BY m.id)
        {base} AND m.key <> ''
        GROUP BY m.owner_id, m.store, m.key
        HAVING count(DISTINCT coalesce(m.value::text, {NORM})) > 1
        ORDER BY 1, 2, 3
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return
    ids = [i for row in rows for i in row[3]]
    info = {
        m["id"]: m
        for m in Memory.objects.filter(pk__in=ids).values(
            "id", "text", "value", "confidence", "created_at", "pinned", "category", "valid_from", "valid_to"
        )
    }
    kinds = defaultdict(list)
    for memory_id, kind in MemorySource.objects.filter(memory_id__in=ids).values_list("memory_id", "kind"):
        kinds[memory_id].append(kind)
    arbiter = settings.BRAIN_CONFLICT_ARBITER if arbiter is None else arbiter
    for owner, store_, key, members in rows:

        def value_of(i):
            m = info[i]
            return repr(m["value"]) if m["value"] is not None else " ".join(m["text"].split()).lower()

        pinned = [i for i in members if info[i]["pinned"]]
        if len({value_of(i) for i in pinned}) > 1:
            findings.notes.append(f"key {key} in {store_}: pinned memories disagree, left for a person")
            continue
        scores = {
            i: conflict_score(
                confidence=info[i]["confidence"], created_at=info[i]["created_at"], kinds=kinds[i], now=now
            )
            for i in members
        }
        winner = max(members, key=lambda i: (scores[i], info[i]["created_at"], i))
        reason = "recency × confidence × source weight: " + ", ".join(
            f"#{i} {scores[i]:.3f}" for i in members
        )
        if pinned:
            winner, reason = pinned[0], f"#{pinned[0]} is pinned"
        elif arbiter:
            picked = model.arbitrate(owner, key, members, info, kinds)
            if picked is not None:
                winner, reason = picked
            elif model.deferred:  # an outage: the arbiter settles it once the server answers
                findings.counts["conflicts_deferred"] += 1
                continue
        # Values kept as of different times (validity windows that do not overlap) are no
        # conflict: only a loser whose window overlaps the winner's folds.
        losers = [
            i
            for i in members
            if value_of(i) != value_of(winner)
            and not info[i]["pinned"]
            and windows_overlap(
                info[i]["valid_from"],
                info[i]["valid_to"],
                info[winner]["valid_from"],
                info[winner]["valid_to"],
            )
        ]
        if not losers:
            continue
        findings.changes.append(
            Change(
                kind=ConsolidationGroup.CONFLICT,
                owner_id=owner,
                store=store_,
                category=info[winner]["category"],
                key=key,
                keep=winner,
                folds=losers,
                reason=reason,
            )
        )
        findings.counts["conflict_groups"] += 1
        findings.counts["conflicts_superseded"] += len(losers)


def find_conflicts_across_owners(findings: Findings, *, owner_id=None, store="") -> None:
    """Conflicts in force between agents in one store (the conflict rule's pairs). A run never
    folds them — retiring what another agent knows needs a person — so it counts them and says
    where; the review queue and Status list them for a reviewer's decision."""
    pairs = conflict_pairs(owner_id=owner_id, store=store)
    if not pairs:
        return
    ids = {i for pair in pairs for i in pair}
    rows = {m["id"]: m for m in Memory.objects.filter(pk__in=ids).values("id", "owner_id", "store", "key")}
    across = sorted(
        {(rows[a]["store"], rows[a]["key"]) for a, b in pairs if rows[a]["owner_id"] != rows[b]["owner_id"]}
    )
    for store_, key in across:
        findings.counts["conflicts_across_owners"] += 1
        findings.notes.append(
            f"key {key} in {store_}: agents disagree; left for a reviewer (Conflicts in force, review queue)"
        )


# --- near-duplicates ----------------------------------------------------------------------------


def _cosine(u, v) -> float:
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if nu == 0 or nv == 0:
        return 0.0
    return float(np.dot(u, v) / (nu * nv))


def near_duplicate(ta, tb, va, vb) -> bool:
    share = overlap(ta, tb)
    if va is None or vb is None:
        return share >= TERM_OVERLAP
    cos = _cosine(va, vb)
    return (share >= TERM_OVERLAP and cos >= VECTOR_CLOSE) or (
        cos >= VECTOR_NEAR_SAME and share >= LOOSE_TERM_OVERLAP
    )


def candidate_pairs(terms: dict[int, frozenset]) -> set[tuple[int, int]]:
    """Pairs that share enough key terms to be near-duplicates by some rule, from an inverted
    index of key terms (terms so common they say nothing are skipped)."""
    postings: dict[str, list[int]] = defaultdict(list)
    for memory_id, ts in terms.items():
        for t in ts:
            postings[t].append(memory_id)
    too_common = max(50, len(terms) // 20)
    pairs = set()
    for ids in postings.values():
        if len(ids) < 2 or len(ids) > too_common:
            continue
        for n, a in enumerate(ids):
            for b in ids[n + 1 :]:
                pairs.add((a, b) if a < b else (b, a))
    return {(a, b) for a, b in pairs if overlap(terms[a], terms[b]) >= LOOSE_TERM_OVERLAP}


def group_near_duplicates(terms: dict[int, frozenset], pairs, vectors: dict, texts=None) -> list[list[int]]:
    """Connected groups of near-duplicates (at most MAX_GROUP memories each). Given `texts`, two
    memories the relation finder calls contradicting are never joined (the merge rules refuse
    a group that still holds such a pair: memory.matching.rules.merge_breach)."""
    parent = {i: i for i in terms}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in sorted(pairs):
        if (
            find(a) != find(b)
            and near_duplicate(terms[a], terms[b], vectors.get(a), vectors.get(b))
            and not (texts and classify(texts[a], texts[b]).relation == CONTRADICTION)
        ):
            parent[find(a)] = find(b)
    groups = defaultdict(list)
    for memory_id in parent:
        groups[find(memory_id)].append(memory_id)
    return sorted(sorted(g)[:MAX_GROUP] for g in groups.values() if len(g) > 1)


def near_duplicate_groups(rows: list[dict]) -> list[list[int]]:
    """Near-duplicate groups among rows ({"id", "text", optional "embedding"}) of one
    store/category."""
    terms = {r["id"]: key_terms(r["text"]) for r in rows}
    vectors = {r["id"]: np.asarray(r["embedding"]) for r in rows if r.get("embedding") is not None}
    texts = {r["id"]: r["text"] for r in rows}
    return group_near_duplicates(terms, candidate_pairs(terms), vectors, texts)


def _vectors(ids) -> dict[int, np.ndarray]:
    """Embeddings of these memories (those that have one), read in chunks: only memories in a
    candidate pair are read, not every vector of the store."""
    ids, out = sorted(ids), {}
    for n in range(0, len(ids), 2000):
        rows = Memory.objects.filter(pk__in=ids[n : n + 2000], embedding__isnull=False).values_list(
            "id", "embedding"
        )
        out.update((i, np.asarray(v)) for i, v in rows)
    return out


def _partition_rows(*, owner_id, store):
    """Active long-term memories a merge or summary may read (not pinned, not entry blocks or
    skill lessons, not in an open plan). Memories already used by this run are filtered by the caller, in Python:
    a NOT IN over thousands of ids is slower than reading the rows."""
    qs = Memory.objects.filter(
        status=Memory.ACTIVE, tier__in=LONG_TERM, entry__isnull=True, skill__isnull=True, pinned=False
    ).exclude(
        pk__in=ConsolidationItem.objects.filter(plan__state__in=ConsolidationPlan.OPEN_STATES).values(
            "memory_id"
        )
    )
    if owner_id is not None:
        qs = qs.filter(owner_id=owner_id)
    if store:
        qs = qs.filter(store=store)
    return qs


def find_near_duplicates(findings: Findings, *, owner_id=None, store="", model: ModelGate) -> None:
    if model.stopped:
        return
    used = findings.used()
    qs = _partition_rows(owner_id=owner_id, store=store)
    partitions = defaultdict(dict)
    for memory_id, owner, store_, category, text in qs.order_by(
        "owner_id", "store", "category", "id"
    ).values_list("id", "owner_id", "store", "category", "text"):
        if memory_id not in used:
            partitions[(owner, store_, category)][memory_id] = text
    for (owner, store_, category), texts in partitions.items():
        terms = {i: key_terms(t) for i, t in texts.items()}
        pairs = candidate_pairs(terms)
        if not pairs:
            continue
        vectors = _vectors({i for pair in pairs for i in pair})
        for members in group_near_duplicates(terms, pairs, vectors, texts):
            findings.counts["near_duplicate_groups_found"] += 1
            if not model.usable(owner):
                continue
            merged = model.merge(
                owner, [texts[i] for i in members], purpose="consolidation.merge", system=MERGE_SYSTEM
            )
            if merged is None:
                continue
            findings.changes.append(
                Change(
                    kind=ConsolidationGroup.NEAR_DUPLICATE,
                    owner_id=owner,
                    store=store_,
                    category=category,
                    folds=members,
                    merged_text=merged,
                    reason=f"{len(members)} memories whose key terms mostly overlap",
                )
            )
            findings.counts["near_duplicate_groups"] += 1
            findings.counts["near_duplicates_merged"] += len(members)


def find_summaries(findings: Findings, *, owner_id=None, store="", model: ModelGate) -> None:
    """A store/category holding more than BRAIN_CONSOLIDATION_SUMMARY_OVER active memories
    once this run's changes apply gets its oldest summarised into one memory."""
    over = settings.BRAIN_CONSOLIDATION_SUMMARY_OVER
    base, params = _eligible_sql(owner_id=owner_id, store=store, exclude=())
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.owner_id, m.store, m.category, count(*) {base} GROUP BY 1, 2, 3 HAVING count(*) > %s",
            [*params, over],
        )
        rows = cursor.fetchall()
    if not rows:
        return
    delta = defaultdict(int)
    for change in findings.changes:
        part = (change.owner_id, change.store, change.category)
        delta[part] -= len(change.folds)
        if change.kind == ConsolidationGroup.NEAR_DUPLICATE:
            delta[part] += 1
    used = findings.used()
    for owner, store_, category, count in rows:
        remaining = count + delta[(owner, store_, category)]
        if remaining <= over:
            continue
        findings.counts["summaries_due"] += 1
        if not model.usable(owner):
            continue
        k = min(SUMMARY_BATCH, max(2, remaining - over + 1))
        oldest = []
        candidates = (
            _partition_rows(owner_id=owner, store=store_)
            .filter(category=category)
            .order_by("created_at", "id")
            .values_list("id", "text")
        )
        for memory_id, text in candidates.iterator(chunk_size=500):
            if memory_id not in used:
                oldest.append((memory_id, text))
                if len(oldest) == k:
                    break
        while len(oldest) > 2 and not model.fits(owner, [t for _, t in oldest], SUMMARY_SYSTEM):
            oldest = oldest[: max(len(oldest) * 3 // 4, 2)]  # the rest waits for the next run
        if len(oldest) < 2:
            continue
        summary = model.merge(
            owner,
            [t for _, t in oldest],
            purpose="consolidation.summary",
            system=SUMMARY_SYSTEM,
            summary=True,
        )
        if summary is None:
            continue
        findings.changes.append(
            Change(
                kind=ConsolidationGroup.SUMMARY,
                owner_id=owner,
                store=store_,
                category=category,
                folds=[i for i, _ in oldest],
                merged_text=summary,
                reason=f"{remaining} memories in {store_}/{category or '-'} (over {over}): the oldest {len(oldest)} summarised",
            )
        )
        used.update(i for i, _ in oldest)
        findings.counts["summary_groups"] += 1
        findings.counts["summarised"] += len(oldest)


def find_changes(*, owner_id=None, store="", actor=None, now=None) -> Findings:
    """Everything one run would change, model calls included (made here, outside any write
    transaction). Nothing is written."""
    findings = Findings()
    model = ModelGate(findings, actor=actor, limit=settings.BRAIN_CONSOLIDATION_MODEL_GROUPS)
    find_duplicates(findings, owner_id=owner_id, store=store)
    find_conflicts(findings, owner_id=owner_id, store=store, now=now, model=model)
    find_conflicts_across_owners(findings, owner_id=owner_id, store=store)
    find_near_duplicates(findings, owner_id=owner_id, store=store, model=model)
    find_summaries(findings, owner_id=owner_id, store=store, model=model)
    findings.counts["model_calls"] = model.calls
    if model.stopped:
        skipped = []
        if findings.counts.get("near_duplicate_groups_found", 0) > findings.counts.get(
            "near_duplicate_groups", 0
        ):
            skipped.append(
                f"{findings.counts['near_duplicate_groups_found'] - findings.counts.get('near_duplicate_groups', 0)} near-duplicate groups"
            )
        if findings.counts.get("summaries_due", 0) > findings.counts.get("summary_groups", 0):
            skipped.append("summaries")
        if findings.counts.get("conflicts_deferred"):
            skipped.append(f"{findings.counts['conflicts_deferred']} conflicts for the arbiter")
        what = " and ".join(skipped) if skipped else "near-duplicates and summaries"
        findings.deferred = model.deferred
        why = (
            f"whose server does not answer — deferred: {model.deferred}; they are asked for again when it answers"
            if model.deferred
            else f"which is unavailable — {model.stopped}"
        )
        findings.notes.insert(
            0, f"only exact duplicates and conflicts were folded; {what} need the model, {why}"
        )
    elif model.calls >= model.limit:
        findings.notes.append(
            f"stopped after {model.limit} model calls (BRAIN_CONSOLIDATION_MODEL_GROUPS); the rest waits for the next run"
        )
    held = _held_by_open_plans(owner_id=owner_id, store=store)
    if held:
        findings.notes.append(held)
    findings.counts = dict(findings.counts)
    return findings


def _held_by_open_plans(*, owner_id, store) -> str:
    """Which open plans hold active memories of this scope, so this run leaves them alone (a run
    whose plan is empty says why): "" when none does."""
    items = ConsolidationItem.objects.filter(
        plan__state__in=ConsolidationPlan.OPEN_STATES, memory__status=Memory.ACTIVE
    ).exclude(role=ConsolidationItem.MERGED)
    if owner_id is not None:
        items = items.filter(memory__owner_id=owner_id)
    if store:
        items = items.filter(memory__store=store)
    rows = list(
        items.values("plan_id", "plan__created_by", "plan__state")
        .annotate(n=Count("memory_id", distinct=True))
        .order_by("plan_id")[:5]
    )
    if not rows:
        return ""
    plans = ", ".join(
        f"{r['n']} in {r['plan__state']} plan #{r['plan_id']} (by {r['plan__created_by']})" for r in rows
    )
    return f"memories held by open plans were left alone: {plans}; apply or discard that plan to free them"
