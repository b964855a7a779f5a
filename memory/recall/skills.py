"""The skills section of compiled context: every enabled skill of the agent, its base
instructions followed by its overlay of lessons, within the overlay budget — and how one skill
renders for an agent, which memory.skills.selectors.skill_load shows too."""

from django.conf import settings
from django.db import connection

from knowledge.models import Agent, Skill
from knowledge.tokens import count_tokens, truncate_to_tokens

EXPERIENCE_HEADER = "Experience:"


def overlay_budget_tokens() -> int:
    return int(settings.BRAIN_OVERLAY_BUDGET_TOKENS)


def lesson_line(text: str) -> str:
    """How a lesson is rendered in the overlay (and counted against its budget)."""
    return f"- {text}"


def lesson_tokens(text: str) -> int:
    return count_tokens(lesson_line(text))


# Token counts of lesson texts and base instructions, by (kind, id, version): a text never
# changes without a new version, and counting 250 lessons on every compiled context was most of
# the skills section's cost (bench_context).
_TOKENS: dict[tuple, int] = {}
_TOKENS_MAX = 100_000


def _tokens(key: tuple, text: str) -> int:
    n = _TOKENS.get(key)
    if n is None:
        if len(_TOKENS) >= _TOKENS_MAX:
            _TOKENS.clear()
        n = _TOKENS[key] = count_tokens(text)
    return n


EXPERIENCE_TOKENS = count_tokens(EXPERIENCE_HEADER)


def render_skill(skill: Skill, lessons: list, budget: int) -> dict:
    """One skill as the agent gets it: a heading, the base instructions, then the overlay's
    lessons in order while they fit within the overlay budget and `budget` (the room left in
    the whole context). Lessons are (id, text, tokens of the text, forced) tuples. Pieces are
    joined by line breaks, which count nothing, so the text counts exactly the sum of its parts."""
    heading = f"## Skill: {skill.title} ({skill.name}, version {skill.version})"
    head_tokens = count_tokens(heading)
    if head_tokens > budget:
        return {
            "text": "",
            "tokens": 0,
            "base_tokens": 0,
            "overlay_tokens": 0,
            "lessons": [],
            "truncated": True,
        }
    base = skill.instructions.strip()
    base_tokens = _tokens(("skill", skill.pk, skill.version), base) if skill.pk else count_tokens(base)
    truncated = False
    if base_tokens > budget - head_tokens:
        base = truncate_to_tokens(base, budget - head_tokens)
        base_tokens, truncated = count_tokens(base), True
    left = budget - head_tokens - base_tokens
    overlay_room = min(overlay_budget_tokens(), max(left - EXPERIENCE_TOKENS, 0))
    chosen, used = [], 0
    for lesson_id, text, text_tokens, forced in lessons:
        tokens = text_tokens + 1  # the "- " of its line: one token
        if used + tokens > overlay_room:
            truncated = True
            continue
        chosen.append((lesson_id, text, tokens, forced))
        used += tokens
    parts = [heading, base] if base else [heading]
    if chosen:
        parts.append(EXPERIENCE_HEADER + "\n" + "\n".join(lesson_line(t) for _, t, _, _ in chosen))
    return {
        "text": "\n".join(parts),
        "tokens": head_tokens + base_tokens + (EXPERIENCE_TOKENS + used if chosen else 0),
        "base_tokens": base_tokens,
        "overlay_tokens": used,
        "lessons": [{"id": i, "tokens": n, **({"forced": True} if f else {})} for i, _, n, f in chosen],
        "truncated": truncated,
    }


_SKILLS: dict[tuple[int, int], Skill] = {}  # (id, version) → the skill row; a change bumps its version

OVERLAY_SQL = """
    SELECT l.skill_id, s.version, m.id, m.position, m.version, m.text
    FROM knowledge_agentskill l
    JOIN knowledge_skill s ON s.id = l.skill_id
    LEFT JOIN knowledge_memory m
           ON m.owner_id = l.agent_id AND m.skill_id = l.skill_id AND m.status = 'active'
          AND NOT (m.id = ANY(%s))
    WHERE l.agent_id = %s AND l.enabled
"""


def _enabled_overlays(agent: Agent, excluded: list[int]) -> dict[int, tuple[int, list]]:
    """{skill id: (skill version, [(position, id, version, text)])} for the agent's enabled
    skills and their active lessons, in one statement (it runs in every compiled context)."""
    with connection.cursor() as cursor:
        cursor.execute(OVERLAY_SQL, [excluded, agent.pk])
        rows = cursor.fetchall()
    out: dict[int, tuple[int, list]] = {}
    for skill_id, skill_version, pk, position, version, text in rows:
        entry = out.setdefault(skill_id, (skill_version, []))
        if pk is not None:
            entry[1].append((position or 0, pk, version, text))
    return out


def _skills(versions: dict[int, int]) -> list[Skill]:
    """The skill rows at these versions, from the per-process cache or one query."""
    missing = [pk for pk, v in versions.items() if (pk, v) not in _SKILLS]
    if missing:
        if len(_SKILLS) > 10_000:
            _SKILLS.clear()
        for skill in Skill.objects.filter(pk__in=missing):
            _SKILLS[(skill.pk, skill.version)] = skill
    found = [_SKILLS.get((pk, v)) for pk, v in versions.items()]
    # A skill edited between the two reads is read again as it is now.
    stale = [pk for pk, skill in zip(versions, found, strict=True) if skill is None]
    fresh = list(Skill.objects.filter(pk__in=stale)) if stale else []
    return sorted([s for s in found if s is not None] + fresh, key=lambda s: s.name)


def skills_section(agent: Agent, *, budget: int, exclude_memory_ids=(), include_memories=()) -> dict:
    """The `skills` section of compiled context: every enabled skill of `agent` (by name), its
    base instructions followed by its active lessons, each overlay within
    BRAIN_OVERLAY_BUDGET_TOKENS and all of it within `budget`. A disabled skill's overlay is
    not read. The eval gate passes a candidate lesson in `include_memories` (placed in its
    skill's overlay exactly where it would stand) and leaves it out with `exclude_memory_ids`.

    One statement reads the enabled skills with their lessons; skill rows come from a cache by
    version (measured by bench_context with 5 skills × 50 lessons: 11 ms with ORM queries and
    recounting every lesson, 3 ms with the ORM and cached counts, see
    docs/perf-notes/2026-12-01-context-and-events.md)."""
    forced = [m for m in include_memories if m.skill_id]
    excluded = sorted(set(exclude_memory_ids) | {m.pk for m in forced if m.pk})
    overlays = _enabled_overlays(agent, excluded)
    for memory in forced:
        if memory.skill_id not in overlays:  # the gate's candidate of a skill not enabled (any more)
            skill = Skill.objects.get(pk=memory.skill_id)
            overlays[skill.pk] = (skill.version, [])
    lessons_of = {
        pk: [(p, i, t, _tokens(("lesson", i, v), t), False) for p, i, v, t in rows]
        for pk, (_, rows) in overlays.items()
    }
    for memory in forced:
        lessons_of[memory.skill_id].append(
            (memory.position or 0, memory.pk or 0, memory.text, count_tokens(memory.text), True)
        )
    rendered, texts, remaining = [], [], budget
    for skill in _skills({pk: version for pk, (version, _) in overlays.items()}):
        lessons = [row[1:] for row in sorted(lessons_of[skill.pk], key=lambda r: (r[0], r[1]))]
        one = render_skill(skill, lessons, remaining)
        if not one["text"]:
            continue
        remaining -= one["tokens"]
        texts.append(one.pop("text"))
        rendered.append({"skill": skill.name, "version": skill.version, **one})
    return {
        "name": "skills",
        "text": "\n\n".join(texts),
        "tokens": budget - remaining,
        "overlay_budget_tokens": overlay_budget_tokens(),
        "skills": rendered,
    }
