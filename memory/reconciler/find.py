"""What one reconciler pass over one agent changes, found without writing anything (model calls
included). Each job adds Changes to the run's Findings; a memory takes part in at most one change
per pass. The jobs (run in the order 3, 1, 2, 4, 5):

1. vector duplicates — same store, tier, key and value, vectors at cosine ≥ θ that pass the code
   guards of memory.reconciler.dedup: each group folds into its most confident memory (a pinned
   one first, then the newest), whose provenance gains theirs. No model.
2. same-key conflicts — memory.consolidation.find.find_conflicts for this agent: recency ×
   confidence × source weight picks the winner; the arbiter (memory.reconciler.arbiter) only
   with BRAIN_RECONCILER_ARBITER on.
3. promotion — an episodic memory restated in at least PROMOTE_TURNS distinct turns (its own
   (conversation, turn), and those of other memories and of messages in its conversation's
   channel that restate it by the dedup test) becomes semantic and gains their sources. A
   candidate strict anti-drift would refuse as semantic is left alone.
4. session digests — episodic memories past their expiry, per conversation and store, are
   summarised into one semantic digest memory citing them (the model when usable, else
   extractive within BRAIN_RECONCILER_DIGEST_TOKENS); applying expires the originals.
   An outage (knowledge.llm.outage) is not "no model": the model's digests and, with the arbiter
   on, its conflicts are left out of the pass untouched (`Findings.deferred` says why) and the
   pass is deferred (memory.reconciler.services), never settled by the lesser rule.
5. links — each new long-term memory gets links to its top-K neighbours in its own store (cosine
   ≥ BRAIN_RECONCILER_LINK_FLOOR), both ways."""

import hashlib
import json
from collections import defaultdict

import numpy as np
from django.conf import settings
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.utils import timezone

from knowledge.embeddings import embedder as embeddings
from knowledge.embeddings.backlog import message_own_text
from knowledge.models import Conversation, Memory, MessageVector
from knowledge.tokens import count_tokens
from memory.consolidation.find import Change, Findings, find_conflicts, find_conflicts_across_owners
from memory.consolidation.model import ModelGate
from memory.models import ConsolidationGroup, ConsolidationItem, ConsolidationPlan, MemoryLink
from memory.reconciler import arbiter as arbiter_prompt
from memory.reconciler import digest_prompt
from memory.reconciler.dedup import close_pairs, is_same, same_statement_guard, unit_rows

PROMOTE_TURNS = 3
LINK_BATCH = 2000  # new memories one pass links at most (the rest wait for the next pass)
JOBS = ("dedup", "conflicts", "promotion", "digest", "links")
DIGEST_CATEGORY = "digest"
# Vectors are read as text and parsed by numpy in one go: far cheaper than a Python object per
# vector for tens of thousands of rows.
VECTOR_TEXT = "vector_text"
_VECTOR_SQL = RawSQL("knowledge_memory.embedding::text", [])


class ReconcilerModel(ModelGate):
    """The light model as one reconciler pass uses it (governed and budgeted; see ModelGate),
    with the reconciler's own arbiter prompt."""

    def arbitrate(self, owner_id, key, members, info, kinds):
        data = self.ask(
            owner_id=owner_id,
            purpose=arbiter_prompt.PURPOSE,
            messages=[
                {"role": "system", "content": arbiter_prompt.SYSTEM},
                {"role": "user", "content": arbiter_prompt.user_message(key, members, info, kinds)},
            ],
            schema=arbiter_prompt.schema(members),
            check=lambda data: arbiter_prompt.check(data, members, info),
        )
        if data is None:
            return None
        refused = arbiter_prompt.check(data, members, info)
        if refused:
            self.findings.counts["model_invalid_outputs"] += 1
            self.findings.notes.append(f"arbiter reply ignored for key {key}: {refused}")
            return None
        return data["winner"], f"arbiter v{arbiter_prompt.VERSION}: {data['reason']}"[:1000]


def _free(qs):
    """Not in an open plan (a memory is changed by one plan at a time)."""
    return qs.exclude(
        pk__in=ConsolidationItem.objects.filter(plan__state__in=ConsolidationPlan.OPEN_STATES).values(
            "memory_id"
        )
    )


def _own_active(owner_id):
    return _free(
        Memory.objects.filter(owner_id=owner_id, status=Memory.ACTIVE, entry__isnull=True, skill__isnull=True)
    ).annotate(**{VECTOR_TEXT: _VECTOR_SQL})


# --- 1. vector duplicates -------------------------------------------------------------------


def find_vector_duplicates(findings: Findings, *, owner_id: int, theta: float, since=None) -> None:
    """Vector duplicates among the agent's active memories; after its first pass (`since` set)
    only pairs with a memory written or changed since then are compared."""
    rows = list(
        _own_active(owner_id)
        .filter(embedding__isnull=False)
        .values_list(
            "id",
            "store",
            "tier",
            "key",
            "value",
            "confidence",
            "pinned",
            "updated_at",
            "text",
            VECTOR_TEXT,
            "created_at",
        )
    )
    used = findings.used()
    rows = [r for r in rows if r[0] not in used]
    findings.counts["dedup_considered"] = len(rows)
    partitions = defaultdict(list)
    for row in rows:
        partitions[(row[1], row[2], row[3], json.dumps(row[4], sort_keys=True))].append(row)
    for (store, _tier, key, _), members in sorted(partitions.items()):
        if len(members) < 2:
            continue
        fresh = None if since is None else [n for n, r in enumerate(members) if r[7] > since]
        if fresh == []:
            continue
        m = unit_rows([r[9] for r in members])
        neighbours = defaultdict(list)
        for i, j, cos in close_pairs(m, theta, rows=fresh):
            if is_same(members[i][8], members[j][8], cos, theta):
                neighbours[i].append((j, cos))
                neighbours[j].append((i, cos))
        if not neighbours:
            continue
        # Star groups: the most confident memory keeps, its direct duplicates fold into it — a
        # chain a≈b≈c never folds c into a unless c is itself a duplicate of a.
        order = sorted(
            neighbours,
            key=lambda i: (members[i][6], members[i][5], members[i][10], members[i][0]),
            reverse=True,
        )
        taken = set()
        for i in order:
            if i in taken:
                continue
            folds = [(j, cos) for j, cos in neighbours[i] if j not in taken and not members[j][6]]
            if not folds:
                continue
            taken.add(i)
            taken.update(j for j, _ in folds)
            keep = members[i]
            findings.changes.append(
                Change(
                    kind=ConsolidationGroup.VECTOR_DUPLICATE,
                    owner_id=owner_id,
                    store=store,
                    category="",
                    key=key,
                    keep=keep[0],
                    folds=sorted(members[j][0] for j, _ in folds),
                    reason=f"cosine ≥ {theta:.2f}: "
                    + ", ".join(f"#{members[j][0]} {cos:.3f}" for j, cos in sorted(folds)),
                )
            )
            findings.counts["vector_duplicate_groups"] += 1
            findings.counts["vector_duplicates_folded"] += len(folds)


# --- 3. promotion -----------------------------------------------------------------------------


def _md5(text: str) -> str:
    """The fingerprint knowledge.memories.fingerprints computes for a message text or a memory's state."""
    return hashlib.md5(text.encode()).hexdigest()


def _turn_of(memory_row) -> tuple:
    conversation_id, turn, memory_id = memory_row
    return ("turn", conversation_id, turn) if turn is not None else ("memory", memory_id)


# How far below theta a message's stored vector (made with the turn before it) may score and still
# have its own words compared.
CONTEXT_SLACK = 0.15


def find_promotions(findings: Findings, *, owner_id: int, theta: float, now) -> None:
    from memory.lifecycle.conflicts import anti_drift_conflicts

    used = findings.used()
    candidates = [
        r
        for r in _own_active(owner_id)
        .filter(tier=Memory.EPISODIC, embedding__isnull=False)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .values_list("id", "text", "conversation_id", "turn", VECTOR_TEXT)
        if r[0] not in used
    ]
    findings.counts["promotion_candidates"] = len(candidates)
    if not candidates:
        return
    corpus = list(
        Memory.objects.filter(
            owner_id=owner_id,
            status__in=(Memory.ACTIVE, Memory.SUPERSEDED, Memory.EXPIRED),
            embedding__isnull=False,
        )
        .annotate(**{VECTOR_TEXT: _VECTOR_SQL})
        .values_list("id", "text", "conversation_id", "turn", VECTOR_TEXT, "status")
    )
    c = unit_rows([r[4] for r in candidates])
    m = unit_rows([r[4] for r in corpus])
    sims = c @ m.T if len(m) else np.zeros((len(c), 0))
    channels = dict(
        Conversation.objects.filter(pk__in={r[2] for r in candidates if r[2]}).values_list("pk", "channel_id")
    )
    messages = defaultdict(list)  # channel → [(message id, text, vector, speaker)]
    # Only vectors of the model and recipe the memories' vectors come from: right after an
    # upgrade or a model change the others are backlog, and comparing across models means nothing.
    for mid, text, channel_id, vector, speaker in MessageVector.objects.filter(
        message__channel_id__in=set(channels.values()), model=embeddings.message_model_name()
    ).values_list("message_id", "message__text", "message__channel_id", "embedding", "message__speaker_name"):
        messages[channel_id].append((mid, text, vector, speaker))
    message_units = {ch: (rows, unit_rows([r[2] for r in rows])) for ch, rows in messages.items()}
    own_vectors: dict[int, np.ndarray] = {}

    def says_it_itself(row, vector) -> bool:
        """A message's stored vector carries the turn before it (knowledge.embeddings); a turn
        counts as saying the memory only when its own words do: its text alone, embedded as the
        backlog embeds a message's own words (message_own_text), is within theta too."""
        if row[0] not in own_vectors:
            try:
                own_vectors[row[0]] = embeddings.embed_texts([message_own_text(row[3], row[1])])[0]
            except embeddings.EmbeddingError:  # embeddings off or failing: nothing is confirmed
                return False
        return float(own_vectors[row[0]] @ vector) >= theta

    for n, (memory_id, text, conversation_id, turn, _) in enumerate(candidates):
        turns = {_turn_of((conversation_id, turn, memory_id))}
        sources = []
        for k in np.nonzero(sims[n] >= theta)[0].tolist():
            other = corpus[k]
            if other[0] == memory_id or not is_same(text, other[1], float(sims[n, k]), theta):
                continue
            key = _turn_of((other[2], other[3], other[0]))
            if key not in turns:
                turns.add(key)
                state = other[5] if other[5] in (Memory.SUPERSEDED,) else "live"
                sources.append(
                    {
                        "kind": "memory",
                        "ref": str(other[0]),
                        "fingerprint": _md5(state),
                        "snapshot": {"status": state},
                    }
                )
        channel = channels.get(conversation_id)
        if channel in message_units:
            rows, units = message_units[channel]
            scores = units @ c[n]
            # The stored vectors are only the first sieve, widened: the turn before a message
            # can pull its vector away from what the message itself says.
            for k in np.nonzero(scores >= theta - CONTEXT_SLACK)[0].tolist():
                if same_statement_guard(text, rows[k][1]) and says_it_itself(rows[k], c[n]):
                    key = ("message", rows[k][0])
                    if key not in turns:
                        turns.add(key)
                        sources.append(
                            {
                                "kind": "message",
                                "ref": str(rows[k][0]),
                                "fingerprint": _md5(rows[k][1]),
                                "snapshot": {"text": rows[k][1]},
                            }
                        )
        if len(turns) < PROMOTE_TURNS:
            continue
        memory = Memory.objects.get(pk=memory_id)
        memory.tier = Memory.SEMANTIC
        refused = anti_drift_conflicts(memory)
        if refused:
            findings.notes.append(
                f"#{memory_id} not promoted: strict anti-drift — it contradicts #{', #'.join(map(str, refused))}"
            )
            continue
        findings.changes.append(
            Change(
                kind=ConsolidationGroup.PROMOTION,
                owner_id=owner_id,
                store=memory.store,
                category=memory.category,
                key=memory.key,
                keep=memory_id,
                folds=[],
                reason=f"restated in {len(turns)} distinct turns",
                data={"sources": sources},
            )
        )
        findings.counts["promoted"] += 1


# --- 4. session digests -------------------------------------------------------------------------


def extractive_digest(texts: list[tuple[int, str]], *, budget: int, conversation_id) -> str:
    """The originals' texts, oldest first, as many whole as fit in `budget` tokens, each citing
    its memory; what did not fit is counted."""
    head = f"Session digest of conversation {conversation_id}:"
    parts, used = [], count_tokens(head)
    for memory_id, text in texts:
        part = f"{' '.join(text.split())} [#{memory_id}]"
        cost = count_tokens(part) + 1
        if parts and used + cost > budget:
            break
        parts.append(part)
        used += cost
    rest = len(texts) - len(parts)
    tail = f" (+{rest} more: #{', #'.join(str(i) for i, _ in texts[len(parts) :])})" if rest else ""
    return f"{head} " + " · ".join(parts) + tail


def find_digests(findings: Findings, *, owner_id: int, now, model: ModelGate) -> None:
    used = findings.used()
    groups = defaultdict(list)
    for memory_id, conversation_id, store, text in (
        _own_active(owner_id)
        .filter(tier=Memory.EPISODIC, conversation__isnull=False, expires_at__lte=now)
        .order_by("created_at", "id")
        .values_list("id", "conversation_id", "store", "text")
    ):
        if memory_id not in used:
            groups[(conversation_id, store)].append((memory_id, text))
    budget = settings.BRAIN_RECONCILER_DIGEST_TOKENS
    for (conversation_id, store), texts in sorted(groups.items()):
        digest, how = None, "extractive"
        if model.deferred:  # an outage: no lesser, extractive digest; the pass comes back for it
            findings.counts["digests_deferred"] += 1
            continue
        if model.usable(owner_id):
            data = model.ask(
                owner_id=owner_id,
                purpose=digest_prompt.PURPOSE,
                messages=[
                    {"role": "system", "content": digest_prompt.SYSTEM},
                    {"role": "user", "content": "\n".join(f"{n}. {t}" for n, (_, t) in enumerate(texts, 1))},
                ],
                schema=digest_prompt.SCHEMA,
                check=lambda data, texts=texts: digest_prompt.check(data["text"], [t for _, t in texts]),
            )
            if data is None and model.deferred:
                findings.counts["digests_deferred"] += 1
                continue
            if data is not None:
                refused = digest_prompt.check(data["text"], [t for _, t in texts])
                if refused:
                    findings.counts["model_invalid_outputs"] += 1
                    findings.notes.append(
                        f"digest of conversation {conversation_id}: model reply ignored ({refused})"
                    )
                else:
                    cited = ", #".join(str(i) for i, _ in texts)
                    digest = (
                        f"Session digest of conversation {conversation_id}: {data['text'].strip()} [#{cited}]"
                    )
                    how = f"model, prompt v{digest_prompt.VERSION}"
        if digest is None:
            digest = extractive_digest(texts, budget=budget, conversation_id=conversation_id)
        findings.changes.append(
            Change(
                kind=ConsolidationGroup.DIGEST,
                owner_id=owner_id,
                store=store,
                category=DIGEST_CATEGORY,
                folds=[i for i, _ in texts],
                merged_text=digest,
                reason=f"{len(texts)} episodic memories of conversation {conversation_id} past their expiry ({how})",
            )
        )
        findings.counts["digests"] += 1
        findings.counts["digested"] += len(texts)


# --- 5. links -------------------------------------------------------------------------------


def find_links(findings: Findings, *, owner_id: int, since, k: int, floor: float) -> None:
    used = findings.used()
    pool = _own_active(owner_id).filter(
        tier__in=(Memory.SEMANTIC, Memory.PROCEDURAL), embedding__isnull=False
    )
    new = pool.filter(created_at__gt=since) if since else pool
    new_ids = []
    for memory_id in (
        new.order_by("-created_at", "-id").values_list("id", flat=True).iterator(chunk_size=2000)
    ):
        if memory_id not in used:
            new_ids.append(memory_id)
            if len(new_ids) == LINK_BATCH:
                break
    if not new_ids:
        return
    rows = [r for r in pool.values_list("id", "store", VECTOR_TEXT) if r[0] not in used]
    linked = set(MemoryLink.objects.filter(memory_id__in=new_ids).values_list("memory_id", "neighbour_id"))
    by_store = defaultdict(list)
    for row in rows:
        by_store[row[1]].append(row)
    wanted = set(new_ids)
    for store, members in sorted(by_store.items()):
        ids = [r[0] for r in members]
        m = unit_rows([r[2] for r in members])
        targets = [n for n, i in enumerate(ids) if i in wanted]
        if not targets or len(ids) < 2:
            continue
        for start in range(0, len(targets), 1024):
            chunk = targets[start : start + 1024]
            sims = m[chunk] @ m.T
            for r, n in enumerate(chunk):
                sims[r, n] = -1.0
                best = np.argpartition(-sims[r], k)[:k] if len(ids) > k else np.arange(len(ids))
                top = best[np.argsort(-sims[r][best])]
                links = [
                    [ids[t], round(float(sims[r, t]), 4)]
                    for t in top.tolist()
                    if sims[r, t] >= floor and (ids[n], ids[t]) not in linked
                ]
                if not links:
                    continue
                findings.changes.append(
                    Change(
                        kind=ConsolidationGroup.LINK,
                        owner_id=owner_id,
                        store=store,
                        category="",
                        keep=ids[n],
                        folds=[],
                        reason=f"{len(links)} nearest neighbours (cosine ≥ {floor:.2f})",
                        data={"links": links},
                    )
                )
                findings.counts["link_groups"] += 1
                findings.counts["links"] += len(links)


def reconcile_find(*, owner_id: int, jobs=JOBS, since=None, actor=None, now=None) -> Findings:
    """Everything one pass over agent `owner_id` would change; nothing is written."""
    now = now or timezone.now()
    theta = settings.BRAIN_RECONCILER_DEDUP_COSINE
    findings = Findings()
    model = ReconcilerModel(findings, actor=actor, limit=settings.BRAIN_RECONCILER_MODEL_CALLS)
    # Promotion first: the restatements that corroborate a memory are read, not changed, and
    # dedup may then fold them among themselves.
    if "promotion" in jobs:
        find_promotions(findings, owner_id=owner_id, theta=theta, now=now)
    if "dedup" in jobs:
        find_vector_duplicates(findings, owner_id=owner_id, theta=theta, since=since)
    if "conflicts" in jobs:
        find_conflicts(
            findings, owner_id=owner_id, now=now, model=model, arbiter=settings.BRAIN_RECONCILER_ARBITER
        )
        find_conflicts_across_owners(findings, owner_id=owner_id)
    if "digest" in jobs:
        find_digests(findings, owner_id=owner_id, now=now, model=model)
    if "links" in jobs:
        find_links(
            findings,
            owner_id=owner_id,
            since=since,
            k=settings.BRAIN_RECONCILER_LINK_K,
            floor=settings.BRAIN_RECONCILER_LINK_FLOOR,
        )
    findings.counts["model_calls"] = model.calls
    waiting = [
        f"{findings.counts[name]} {what}"
        for name, what in (
            ("digests_deferred", "digests"),
            ("conflicts_deferred", "conflicts for the arbiter"),
        )
        if findings.counts.get(name)
    ]
    if waiting:  # an outage (knowledge.llm.outage): that model work waits, its memories untouched
        findings.deferred = model.deferred
        findings.notes.append(
            f"{' and '.join(waiting)} wait for the model server — deferred: {model.deferred}; "
            "the pass is asked for again when it answers"
        )
    elif model.stopped and not model.deferred and findings.counts.get("digests"):
        findings.notes.append(f"digests are extractive: the model is unavailable — {model.stopped}")
    if (
        settings.BRAIN_RECONCILER_ARBITER
        and model.stopped
        and not model.deferred
        and findings.counts.get("conflict_groups")
    ):
        findings.notes.append(
            f"conflicts settled by the formula: the arbiter is unavailable — {model.stopped}"
        )
    findings.counts = dict(findings.counts)
    return findings
