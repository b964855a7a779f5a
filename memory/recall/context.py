"""Context compilation: what goes into an agent's prompt for one turn, within a token budget.

Sections, in order: the agent's instructions, its pinned memo, its enabled skills (each skill's
base instructions followed by the agent's overlay of lessons, each overlay within
BRAIN_OVERLAY_BUDGET_TOKENS; see memory.recall.skills.skills_section), the conversation's
history when `history_turns` > 0 (its last turns verbatim and a rolling summary of the earlier
ones; see memory.history.section — recalled memory leaves out the turns shown there), and
recalled memory.
Lessons reach the prompt only through the skills section: recall's routes leave them out.
Recalled memory comes from the same routes, fusion and decay as memory_search; here each
candidate is scored

    relevance × recency × confidence × density

- relevance: the fused reciprocal-rank score divided by the best score a candidate could get
  (first in every route), times the reranker's verdict when one runs;
- recency: the temporal decay factor of recall (full for conversation, bounded for knowledge);
- confidence: a memory's confidence; entries 1.0; raw messages and episodes 0.7;
- density: 1 for an item of up to DENSITY_TOKENS tokens, falling as sqrt(DENSITY_TOKENS / tokens)
  for longer ones, so a short precise memory beats a long thread of equal relevance.

Items are taken best first while they fit. Every count is knowledge.tokens.count_tokens, and the
total never exceeds the budget (the sections joined by blank lines count exactly their sum).

The eval gate calls `context_compile` with `include_memories=[candidate]` (the candidate memory
placed first in recalled memory, rendered exactly as recall renders memories — or, for a skill
lesson, in its skill's overlay where it would stand) and with
`exclude_memory_ids=[id]` (left out of every route), so with/without differ only in that memory.
"""

import math

from django.utils import timezone

from knowledge.models import Memory
from knowledge.tokens import count_tokens, truncate_to_tokens
from knowledge.web import times_out
from memory.history.section import history_section
from memory.recall.correct import correct_candidates
from memory.recall.expand import Expander, Item, item_cap, memory_text
from memory.recall.fuse import Candidate, best_fused
from memory.recall.memo import memo_budget_tokens, memo_for
from memory.recall.params import DEFAULT_PARAMS, RecallParams
from memory.recall.routes import ENTRY, EPISODE, MEMORY, MESSAGE
from memory.recall.scope import RecallScope
from memory.recall.search import above_floor, recall_candidates
from memory.recall.skills import skills_section

DENSITY_TOKENS = 120
MAX_RECALLED_ITEMS = 30


def item_label(cand: Candidate) -> str:
    """The one-line header of a recalled item in the prompt."""
    obj = cand.obj
    when = cand.time
    date = f" · {when:%Y-%m-%d}" if when else ""
    if cand.kind == MEMORY:
        # when it held first (its own time: valid_from, else when it was written), then when Brain
        # learned it when that was another day (an import, an approval days later)
        label = f"memory {obj.pk or 'new'} · {obj.tier}"
        held = obj.held_from
        if held is not None:
            label += f" · held {held:%Y-%m-%d}"
        if obj.valid_to and obj.valid_to <= timezone.now():
            label += f" · until {obj.valid_to:%Y-%m-%d}"
        if held is not None and obj.created_at is not None and obj.created_at.date() != held.date():
            label += f" · learned {obj.created_at:%Y-%m-%d}"
        elif held is None and when:
            label += date
        return f"[{label}]"
    if cand.kind == ENTRY:
        return f"[entry {obj.pk}{date}]"
    if cand.kind == EPISODE:
        return f"[episode {obj.pk}{date}]"
    return f"[conversation{' thread' if obj.thread else ''}{date}]"


def _render(cand: Candidate, item: Item) -> str:
    return f"{item_label(cand)}\n{item.text}"


def _density(tokens: int) -> float:
    return min(1.0, math.sqrt(DENSITY_TOKENS / max(tokens, 1)))


def context_compile(
    scope: RecallScope,
    *,
    q: str,
    budget_tokens: int,
    now=None,
    params: RecallParams = DEFAULT_PARAMS,
    exclude_memory_ids=(),
    include_memories: list[Memory] = (),
    history_turns: int = 0,
) -> dict:
    """The prompt sections for one turn of `scope.agent` in `scope`'s conversation."""
    now = now or timezone.now()
    agent = scope.agent
    remaining = budget_tokens
    truncated = []
    sections = []

    instructions = agent.instructions.strip()
    text = truncate_to_tokens(instructions, remaining)
    if text != instructions:
        truncated.append("instructions")
    sections.append({"name": "instructions", "text": text, "tokens": count_tokens(text)})
    remaining -= sections[-1]["tokens"]

    memo = memo_for(agent)
    memo_text = memo.text.strip()
    text = truncate_to_tokens(memo_text, min(remaining, memo_budget_tokens()))
    if text != memo_text:
        truncated.append("pinned_memo")
    sections.append(
        {
            "name": "pinned_memo",
            "text": text,
            "tokens": count_tokens(text),
            "budget_tokens": memo_budget_tokens(),
            "version": memo.version,
        }
    )
    remaining -= sections[-1]["tokens"]

    skills = skills_section(
        agent, budget=remaining, exclude_memory_ids=exclude_memory_ids, include_memories=include_memories
    )
    sections.append(skills)
    remaining -= skills["tokens"]
    if any(s["truncated"] for s in skills["skills"]):
        truncated.append("skills")

    shown_messages = set()
    if history_turns > 0:
        history = history_section(scope, budget=remaining, turns=history_turns)
        sections.append(history)
        remaining -= history["tokens"]
        shown_messages = {turn["id"] for turn in history["turns"]}

    lessons = [m for m in include_memories if m.skill_id]
    recall_forced = [m for m in include_memories if not m.skill_id]
    recalled = _recalled(
        scope,
        q,
        remaining,
        now,
        params,
        [*exclude_memory_ids, *(m.pk for m in lessons if m.pk)],
        recall_forced,
        shown_messages,
    )
    sections.append(recalled)
    total = sum(s["tokens"] for s in sections)
    assert total <= budget_tokens, (total, budget_tokens)
    return {
        "agent": agent.name,
        "scope": scope.describe(),
        "query": q,
        "now": now,
        "budget_tokens": budget_tokens,
        "total_tokens": total,
        "truncated": truncated,
        "sections": sections,
    }


def _recalled(scope, q, budget, now, params, exclude_memory_ids, include_memories, shown_messages=()) -> dict:
    forced = [m for m in include_memories]
    excluded = set(exclude_memory_ids) | {m.pk for m in forced if m.pk}
    ranking = recall_candidates(
        scope,
        q=q,
        now=now,
        params=params,
        exclude_memory_ids=tuple(excluded),
        hydrate_top=2 * MAX_RECALLED_ITEMS,
    )
    best = best_fused(params)
    expander = Expander(scope, now, params)
    pool = correct_candidates(
        ranking.candidates[: 2 * MAX_RECALLED_ITEMS], scope=scope, upto=2 * MAX_RECALLED_ITEMS
    )
    pool, left_out = above_floor(pool, params, upto=MAX_RECALLED_ITEMS)
    expander.prefetch(pool)
    cap = item_cap(max(budget, 1), params)

    scored = []
    for cand in pool:
        item = expander.item(cand, cap)
        if item is None:
            continue
        relevance = cand.fused / best
        if cand.rerank is not None:
            relevance *= 0.5 + cand.rerank
        rendered = _render(cand, item)
        tokens = count_tokens(rendered)
        parts = {
            "relevance": round(relevance, 4),
            "recency": round(cand.decay, 4),
            "confidence": round(cand.confidence, 4),
            "density": round(_density(tokens), 4),
        }
        score = parts["relevance"] * parts["recency"] * parts["confidence"] * parts["density"]
        scored.append((score, cand, item, rendered, tokens, parts))
    scored.sort(key=lambda s: -s[0])

    chosen_text, chosen_items, used = [], [], 0
    shown_messages = set(shown_messages)
    for memory in forced:  # the gate's candidate goes first, rendered as recall renders memories
        cand = Candidate.for_memory(memory, decay=1.0)
        text = truncate_to_tokens(memory_text(memory), max(cap - count_tokens(item_label(cand)) - 1, 0))
        rendered = f"{item_label(cand)}\n{text}"
        tokens = count_tokens(rendered)
        if not text or used + tokens > budget:
            continue
        chosen_text.append(rendered)
        chosen_items.append(
            {"kind": MEMORY, "id": memory.pk, **times_out(memory), "tokens": tokens, "forced": True}
        )
        used += tokens
    for score, cand, item, rendered, tokens, parts in scored:
        if len(chosen_items) >= MAX_RECALLED_ITEMS:
            break
        if cand.kind == MESSAGE and cand.id in shown_messages:
            continue
        if used + tokens > budget:
            continue
        chosen_text.append(rendered)
        chosen_items.append(
            {
                "kind": cand.kind,
                "id": cand.id,
                **times_out(cand.obj),
                "tokens": tokens,
                "score": round(score, 6),
                **parts,
                **({"conflict_with": cand.conflict_with} if cand.conflict_with else {}),
            }
        )
        used += tokens
        shown_messages |= item.message_ids
    text = "\n".join(chosen_text)
    return {
        "name": "recalled_memory",
        "text": text,
        "tokens": count_tokens(text),
        "items": chosen_items,
        "left_out": left_out,
    }


def context_text(compiled: dict) -> str:
    """The prompt text of a compiled context: its non-empty sections, in order, separated by a
    blank line. The eval gate sends exactly this as the system message."""
    return "\n\n".join(section["text"] for section in compiled["sections"] if section["text"])
