"""One answer, one copy of each fact, and never a conflict shown as two facts.

Applied to the candidates a search or a context may show, before they are packed:
- near-identical memories (the same folded text, the same key and value, or key terms nearly
  the same — memory.matching.terms) keep only the best-ranked copy;
- memories in a conflict still in force (same store and key, another value, overlapping
  validity — the conflict rule of memory.lifecycle) keep only the newest one among those
  ranked, which carries `conflict_with` and a note "(conflicts with #10: Slack)". A conflict
  can exist only in older data or after a restore: activation refuses to create one;
- memories without a key in a contradiction still in force (a trusted write recorded against
  an active memory: knowledge.MemoryContradiction) likewise: the newest ranked one stands,
  with "(disagrees with #10 from 2026-11-02: …)", so an agent can say "was X until then".

Only memories the scope may read take part (`scope.knowledge_q`, from knowledge.access): a rival
the reader may not read is never named, dated, quoted or counted, so another agent's `self` or
another person's private memory neither shows through a note nor hides a memory the reader may
read.

One statement for each, the first only when a ranked memory has a key."""

import json

from django.db.models import Q

from knowledge import access
from knowledge.models import Memory, MemoryContradiction
from memory.matching.facts import contradicts, windows_overlap
from memory.matching.terms import key_terms, near_identical, normalised
from memory.recall.routes import MEMORY


def _label(row: Memory) -> str:
    shown = row.value if isinstance(row.value, str) else None
    if shown is None and row.value is not None:
        shown = json.dumps(row.value, ensure_ascii=False)
    shown = shown if shown is not None else " ".join(row.text.split())
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _claim(row: Memory) -> str:
    """What a keyless memory says, for a note (its text, up to 80 characters)."""
    shown = " ".join(row.text.split())
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _start(row: Memory):
    return row.valid_from or row.created_at


def correct_candidates(candidates: list, *, scope, upto: int) -> list:
    """`candidates` with near-identical and conflicting memories among the first `upto` (the
    ones that may be shown) left out as described above, rivals read through `scope` (a
    RecallScope); the order is kept."""
    head = candidates[:upto]
    memories = [c for c in head if c.kind == MEMORY and c.obj is not None]
    if len(memories) < 1:
        return candidates
    drop: set = set()
    seen_text: set = set()
    seen_terms: list = []
    for cand in memories:
        # an ended fact and a current one are history, not copies: compared only within each
        ended = cand.obj.valid_to is not None
        text = (ended, normalised(cand.obj.text))
        terms = key_terms(cand.obj.text)
        if text in seen_text or any(e == ended and near_identical(terms, t) for e, t in seen_terms):
            drop.add(cand.key)
            continue
        seen_text.add(text)
        seen_terms.append((ended, terms))

    keyed = [c for c in memories if c.obj.key and c.key not in drop]
    if keyed:
        rows = list(
            Memory.objects.filter(status=Memory.ACTIVE)
            .filter(scope.knowledge_q)
            .filter(Q(key__in={c.obj.key for c in keyed}), Q(store__in={c.obj.store for c in keyed}))
            .only("id", "owner_id", "store", "key", "value", "text", "valid_from", "valid_to", "created_at")
        )
        by_key: dict = {}
        for row in rows:
            by_key.setdefault((row.store, row.key), []).append(row)
        shown = {c.id for c in keyed}
        own = {row.pk: row for row in rows}
        for cand in keyed:
            me = own.get(cand.id)
            if me is None:
                continue
            rivals = [
                row
                for row in by_key.get((me.store, me.key), [])
                if row.pk != me.pk
                and (row.owner_id == me.owner_id or not me.store.startswith(access.OWNER_ONLY_PREFIXES))
                and contradicts(me, row)
                and windows_overlap(me.valid_from, me.valid_to, row.valid_from, row.valid_to)
            ]
            if not rivals:
                continue
            newest = max([me, *rivals], key=lambda r: (_start(r), r.pk))
            if newest.pk != me.pk and newest.pk in shown:
                drop.add(cand.key)  # the newest of the conflict stands for it, with the note
                continue
            others = [r for r in rivals if r.pk != me.pk]
            cand.conflict_with = sorted(r.pk for r in others)
            cand.conflict_note = "(conflicts with " + ", ".join(f"#{r.pk}: {_label(r)}" for r in others) + ")"
    _contradictions(memories, drop, scope)
    if not drop:
        return candidates
    return [c for c in head if c.key not in drop] + candidates[upto:]


def _contradictions(memories: list, drop: set, scope) -> None:
    """Keyless memories in a recorded contradiction in force (both active, overlapping
    validity): the newest among those ranked stands, with the note; the others are dropped."""
    keyless = {c.id: c for c in memories if not c.obj.key and c.key not in drop}
    if not keyless:
        return
    pairs = MemoryContradiction.objects.filter(
        Q(memory_id__in=keyless) | Q(other_id__in=keyless),
        memory__status=Memory.ACTIVE,
        other__status=Memory.ACTIVE,
    ).select_related("memory", "other")
    pairs = list(pairs)
    readable = set(
        Memory.objects.filter(scope.knowledge_q)
        .filter(pk__in={pk for pair in pairs for pk in (pair.memory_id, pair.other_id)})
        .values_list("pk", flat=True)
    )
    rivals: dict[int, list[Memory]] = {}
    for pair in pairs:
        if pair.memory_id not in readable or pair.other_id not in readable:
            continue
        a, b = pair.memory, pair.other
        if windows_overlap(a.valid_from, a.valid_to, b.valid_from, b.valid_to):
            rivals.setdefault(a.pk, []).append(b)
            rivals.setdefault(b.pk, []).append(a)
    for memory_id, others in rivals.items():
        cand = keyless.get(memory_id)
        if cand is None:
            continue
        newest = max([cand.obj, *others], key=lambda r: (_start(r), r.pk))
        if newest.pk != memory_id and newest.pk in keyless:
            drop.add(cand.key)
            continue
        older = sorted(others, key=lambda r: (_start(r), r.pk))
        cand.conflict_with = [r.pk for r in older]
        cand.conflict_note = (
            "(disagrees with "
            + ", ".join(f"#{r.pk} from {_start(r):%Y-%m-%d}: {_claim(r)}" for r in older)
            + ")"
        )
