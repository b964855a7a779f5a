"""Every write to skills, their enablement, task outcomes and overlay lessons.

A lesson is a `procedural` memory (category `lesson`) owned by the agent, in its `self` store,
attached to one skill (`Memory.skill`, ordered by `position`). New lessons — and revisions,
which supersede the lesson they revise — are written by `memory.lifecycle.write.memory_write`, so they
pass the one activation function (review for untrusted agents, the eval gate, supersession) and
get their provenance recorded like any memory. People's edits and removals are audited with
before/after revisions, so the Audit tab restores them.

Each service is one transaction that writes its audit event inside it. Every overlay write
locks the (agent, skill) enablement row first, so two writers of one overlay take turns (no
duplicate slips past the near-duplicate check, no two new lessons take one position)."""

import numpy as np
from django.db import IntegrityError, transaction
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_record, snapshot
from knowledge.entries.services import block_snapshot
from knowledge.errors import Conflict, Invalid, NotFound
from knowledge.memories.rows import memory_row_state, memory_text_revise
from knowledge.models import Agent, AgentSkill, Conversation, Memory, Message, Skill, TaskOutcome
from knowledge.principal import ADMIN, Principal
from memory.lifecycle.activation_hooks import API_WRITE
from memory.lifecycle.write import WriteRequest, memory_write
from memory.matching.relations import CONTRADICTION, classify
from memory.matching.terms import key_terms, overlap
from memory.skills.selectors import lesson_tokens, overlay_budget_tokens

LESSON_CATEGORY = "lesson"
LESSON_STORE = access.SELF
MAX_TITLE = 200
MAX_INSTRUCTIONS = 50_000
MAX_LESSON = 2_000
MAX_REASON = 2_000
MAX_TASK = 500
MAX_STEPS = 50
MAX_STEP = 500
MAX_CORRECTION = 2_000
MAX_EXTERNAL_ID = 200
MAX_SOURCES = 20
EVIDENCE_KINDS = ("task_outcome", "message", "conversation")
SLUG = Skill.NAME_RULE  # no dots: the console's <slug:> URLs must hold every skill's name

# Near-duplicate lessons, chosen on 18 labelled pairs of support-desk lessons (the pairs are in
# tests/memory/skills/test_near_duplicates.py): 8 paraphrases had cosine 0.77–0.97 (local
# MiniLM) and key-term overlap (Dice) 0.50–0.80 — the one at 0.50 has cosine 0.95; 10 related
# but different rules had cosine 0.33–0.85 and overlap 0.18–0.50 (the highest both: "refund over
# 100 EUR: ask a supervisor" against "under 100 EUR: approve"). "cosine ≥ 0.75 and overlap ≥
# 0.52, or cosine ≥ 0.92" takes all 8 and none of the 10; the overlap margin is thin (0.50 vs
# 0.545), so a lesson close to the line may need `revises`. Without vectors, only the same set
# of key terms counts.
NEAR_COSINE = 0.75
NEAR_OVERLAP = 0.52
SAME_COSINE = 0.92


# --- input cleaning ----------------------------------------------------------------------------


def clean_text(value, field: str, *, max_length: int, required: bool = True) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise Invalid({field: "Must be a string."})
    value = value.strip()
    if required and not value:
        raise Invalid({field: "This field may not be blank."})
    if len(value) > max_length:
        raise Invalid({field: f"At most {max_length:,} characters."})
    return value


def _author(actor: Principal) -> str:
    return f"{actor.kind_label} {actor.name}"


def _require_admin(actor: Principal, what: str) -> None:
    access.require_role(actor, ADMIN, f"Only admins {what}.", person=True)


def _skill_audit(action, *, actor, skill, before, reason="", data=None):
    return audit_record(
        action,
        actor=actor,
        object_type="skill",
        object_ids=[skill.pk],
        reason=reason,
        data={"skill": skill.name, "version": skill.version, **(data or {})},
        revisions=[("skill", skill.pk, before, snapshot(skill))],
    )


# --- skills --------------------------------------------------------------------------------------


def skill_create(*, actor: Principal, name: str, title: str, instructions: str = "") -> Skill:
    """Create a skill (admins only: nothing but a person creates a skill — no agent, no
    Dreaming run). 400 for a bad or taken name."""
    _require_admin(actor, "create skills")
    name = clean_text(name, "name", max_length=64)
    if not SLUG.fullmatch(name):
        raise Invalid({"name": "Lower-case letters, digits, dashes and underscores."})
    title = clean_text(title, "title", max_length=MAX_TITLE)
    instructions = clean_text(instructions, "instructions", max_length=MAX_INSTRUCTIONS, required=False)
    try:
        with transaction.atomic():
            skill = Skill.objects.create(
                name=name, title=title, instructions=instructions, updated_by=_author(actor)
            )
            _skill_audit("skill.created", actor=actor, skill=skill, before=None)
    except IntegrityError:
        raise Invalid({"name": f"There is already a skill named {name}."})
    return skill


def skill_update(
    *,
    actor: Principal,
    skill: Skill,
    title: str | None = None,
    instructions: str | None = None,
    expected_version: int | None = None,
    reason: str = "",
) -> Skill:
    """Edit a skill's title or base instructions (admins only). Each change is a new version,
    audited with its before/after so it can be restored. With `expected_version`, a concurrent
    edit makes this one fail (409) instead of overwriting it."""
    _require_admin(actor, "edit skills")
    changes = {}
    if title is not None:
        changes["title"] = clean_text(title, "title", max_length=MAX_TITLE)
    if instructions is not None:
        changes["instructions"] = clean_text(
            instructions, "instructions", max_length=MAX_INSTRUCTIONS, required=False
        )
    reason = clean_text(reason, "reason", max_length=MAX_REASON, required=False)
    with transaction.atomic():
        skill = Skill.objects.select_for_update().get(pk=skill.pk)
        if expected_version is not None and expected_version != skill.version:
            raise Conflict(
                f"Skill {skill.name} was changed by {skill.updated_by} since you opened it "
                f"(version {skill.version}, you had {expected_version}). Reload and try again.",
                skill=skill.name,
                version=skill.version,
            )
        changed = [f for f, v in changes.items() if getattr(skill, f) != v]
        if not changed:
            return skill
        before = snapshot(skill)
        for field in changed:
            setattr(skill, field, changes[field])
        skill.version += 1
        skill.updated_by = _author(actor)
        skill.save()
        _skill_audit(
            "skill.updated", actor=actor, skill=skill, before=before, reason=reason, data={"fields": changed}
        )
    return skill


def skill_enable(*, actor: Principal, agent: Agent, skill: Skill, enabled: bool) -> AgentSkill:
    """Enable or disable a skill for an agent (people with the admin role). Disabling keeps the
    overlay stored; it only leaves the agent's context. Setting the state it already has writes
    nothing."""
    _require_admin(actor, "enable or disable skills")
    if not isinstance(enabled, bool):
        raise Invalid({"enabled": "Must be true or false."})
    with transaction.atomic():
        link, created = AgentSkill.objects.select_for_update().get_or_create(
            agent=agent, skill=skill, defaults={"enabled": enabled, "updated_by": _author(actor)}
        )
        if not created and link.enabled == enabled:
            return link
        before = None if created else snapshot(link)
        if not created:
            link.enabled, link.updated_by = enabled, _author(actor)
            link.save(update_fields=["enabled", "updated_by", "updated_at"])
        audit_record(
            "skill.enabled" if enabled else "skill.disabled",
            actor=actor,
            store=LESSON_STORE,
            owner=agent.name,
            object_type="agent_skill",
            object_ids=[link.pk],
            data={"skill": skill.name, "agent": agent.name, "enabled": enabled},
            revisions=[("agent_skill", link.pk, before, snapshot(link))],
        )
    return link


# --- lessons ---------------------------------------------------------------------------------------


def _lock_link(agent: Agent, skill: Skill) -> AgentSkill | None:
    return AgentSkill.objects.select_for_update().filter(agent=agent, skill=skill).first()


def _touch(link: AgentSkill, actor: Principal, change: str, *, by: str = "") -> None:
    link.overlay_change, link.overlay_changed_at = change, timezone.now()
    link.overlay_changed_by = by or _author(actor)
    link.save(update_fields=["overlay_change", "overlay_changed_at", "overlay_changed_by", "updated_at"])


def overlay_lessons(agent: Agent, skill: Skill, *, statuses=Memory.LIVE, lock: bool = False) -> list[Memory]:
    qs = Memory.objects.filter(owner=agent, skill=skill, status__in=statuses).order_by("position", "id")
    if lock:
        qs = qs.select_for_update(of=("self",))
    return list(qs)


def _clean_sources(sources, *, agent: Agent) -> list[dict]:
    """At least one piece of evidence (a task outcome, message or conversation) the agent has;
    other source kinds may be cited beside it. Unknown and foreign ids get the same answer."""
    if not isinstance(sources, list | tuple) or not sources:
        raise Invalid({"sources": "At least one source: a task outcome, message or conversation."})
    if len(sources) > MAX_SOURCES:
        raise Invalid({"sources": f"At most {MAX_SOURCES} sources."})
    from knowledge.memories.fingerprints import validate_ref

    out, seen = [], set()
    for item in sources:
        if isinstance(item, str):
            kind, _, ref = item.strip().partition(":")
            item = {"kind": kind, "ref": ref}
        if not isinstance(item, dict) or set(item) - {"kind", "ref"}:
            raise Invalid({"sources": "Each source is {kind, ref}."})
        kind, ref = str(item.get("kind", "")).strip(), str(item.get("ref", "")).strip()
        problem = validate_ref(kind, ref)
        if problem:
            raise Invalid({"sources": problem})
        if (kind, ref) not in seen:
            seen.add((kind, ref))
            out.append({"kind": kind, "ref": ref})
    if not any(s["kind"] in EVIDENCE_KINDS for s in out):
        raise Invalid({"sources": "At least one source must be a task outcome, message or conversation."})
    wanted = {k: {int(s["ref"]) for s in out if s["kind"] == k} for k in EVIDENCE_KINDS}
    found = {
        "task_outcome": set(
            TaskOutcome.objects.filter(agent=agent, pk__in=wanted["task_outcome"]).values_list(
                "pk", flat=True
            )
        ),
        "conversation": set(
            Conversation.objects.filter(agent=agent, pk__in=wanted["conversation"]).values_list(
                "pk", flat=True
            )
        ),
        "message": set(
            Message.objects.filter(access.message_readable_q(Principal.for_agent(agent)))
            .filter(pk__in=wanted["message"])
            .values_list("pk", flat=True)
        )
        if wanted["message"]
        else set(),
    }
    missing = [f"{k}:{i}" for k in EVIDENCE_KINDS for i in sorted(wanted[k] - found[k])]
    if missing:
        raise Invalid({"sources": f"No such source of {agent.name}: {', '.join(missing)}."})
    return out


def near_duplicate(text: str, lessons: list[Memory]) -> tuple[Memory | None, object]:
    """The first lesson of `lessons` that `text` nearly repeats (see NEAR_COSINE), and the
    vector of `text` (None when embeddings are off), so the new lesson is stored with it."""
    from knowledge.embeddings import embedder as embeddings

    terms = key_terms(text)
    for lesson in lessons:
        if key_terms(lesson.text) == terms:
            return lesson, None
    if not embeddings.enabled():
        return None, None
    model = embeddings.model_name()
    try:
        # A vector made by another model is not comparable: those lessons are embedded again.
        missing = [m for m in lessons if m.embedding is None or m.embedding_model != model]
        vectors = embeddings.embed_texts([text, *[m.text for m in missing]])
    except embeddings.EmbeddingError:
        return None, None
    new, fresh = vectors[0], dict(zip((m.pk for m in missing), vectors[1:], strict=True))
    for lesson in lessons:
        other = fresh.get(lesson.pk, lesson.embedding)
        cosine = float(np.dot(new, np.asarray(other, dtype=np.float32)))
        if (
            cosine >= SAME_COSINE
            or (cosine >= NEAR_COSINE and overlap(terms, key_terms(lesson.text)) >= NEAR_OVERLAP)
        ) and classify(lesson.text, text).relation != CONTRADICTION:  # never a contradiction
            return lesson, new
    return None, new


def lesson_add(
    *,
    actor: Principal,
    agent: Agent,
    skill: Skill,
    text: str,
    sources,
    revises: int | None = None,
    route: str = API_WRITE,
    author_kind: str = "",
    author_name: str = "",
) -> Memory:
    """Add a lesson to the agent's overlay of `skill`, or with `revises` replace one of its
    lessons by a new version of it (the old one is superseded when the new one goes into
    force). Rules: only an enabled skill takes experience (409); a lesson that nearly repeats
    another lesson of the overlay is refused (409 naming it) unless it revises that lesson; the
    overlay must stay within BRAIN_OVERLAY_BUDGET_TOKENS (400). The lesson passes the one
    activation function, so an untrusted agent's lesson waits for review and the eval gate
    sees it."""
    access.check_write(actor, owner=agent, store=LESSON_STORE)
    text = clean_text(text, "lesson", max_length=MAX_LESSON)
    sources = _clean_sources(sources, agent=agent)
    if revises is not None and (isinstance(revises, bool) or not isinstance(revises, int)):
        raise Invalid({"revises": "A lesson id."})
    with transaction.atomic():
        link = _lock_link(agent, skill)
        if link is None or not link.enabled:
            raise Conflict(
                f"Skill {skill.name} is not enabled for {agent.name}; only an enabled skill takes "
                "experience.",
                skill=skill.name,
            )
        lessons = overlay_lessons(agent, skill)
        old = None
        if revises is not None:
            old = next((m for m in lessons if m.pk == revises), None)
            if old is None:
                raise Invalid({"revises": f"Lesson {revises} is not a live lesson of this overlay."})
        others = [m for m in lessons if m is not old]
        twin, vector = near_duplicate(text, others)
        if twin is not None:
            raise Conflict(
                f"This lesson nearly repeats lesson {twin.pk} of the overlay; revise it instead "
                f'("revises": {twin.pk}).',
                duplicate_of=twin.pk,
            )
        used = sum(lesson_tokens(m.text) for m in others)
        budget = overlay_budget_tokens()
        if used + lesson_tokens(text) > budget:
            raise Invalid(
                {
                    "lesson": f"The overlay would count {used + lesson_tokens(text):,} tokens; its budget is "
                    f"{budget:,}. Revise or remove a lesson first."
                }
            )
        position = (
            old.position if old is not None else (max((m.position or 0 for m in lessons), default=-1) + 1)
        )
        attach = {"skill": skill, "position": position}
        if vector is not None:
            from knowledge.embeddings import embedder as embeddings

            attach.update(embedding=vector, embedding_model=embeddings.model_name())
        lesson = memory_write(
            actor=actor,
            request=WriteRequest(
                owner=agent,
                store=LESSON_STORE,
                text=text,
                sources=sources,
                tier=Memory.PROCEDURAL,
                category=LESSON_CATEGORY,
                supersedes=old,
                author_kind=author_kind,
                author_name=author_name,
                attach=attach,
                audit_data={"skill": skill.name, "lesson": True, "revises": revises},
            ),
            route=route,
        )
        _touch(
            link,
            actor,
            "lesson revised" if old is not None else "lesson added",
            by=f"{author_kind} {author_name}" if author_kind else "",
        )
    return lesson


def lesson_revise(
    *, actor: Principal, agent: Agent, skill: Skill, lesson_id: int, text: str, sources, **kw
) -> Memory:
    """A new version of lesson `lesson_id` that supersedes it once in force (lesson_add with
    `revises`)."""
    return lesson_add(
        actor=actor, agent=agent, skill=skill, text=text, sources=sources, revises=lesson_id, **kw
    )


def _lock_lesson(lesson_id: int) -> Memory:
    lesson = (
        Memory.objects.select_for_update(of=("self",))
        .select_related("owner", "skill")
        .prefetch_related("sources")
        .filter(pk=lesson_id, skill__isnull=False, status__in=Memory.LIVE)
        .first()
    )
    if lesson is None:
        raise NotFound(f"There is no live lesson {lesson_id}.", lesson=lesson_id)
    return lesson


def _lesson_audit(action, *, actor, lesson, before, reason="", data=None):
    return audit_record(
        action,
        actor=actor,
        store=lesson.store,
        owner=lesson.owner.name,
        object_type="memory",
        object_ids=[lesson.pk],
        reason=reason,
        data={"skill": lesson.skill.name, "lesson": lesson.pk, **(data or {})},
        revisions=[("memory", lesson.pk, before, block_snapshot(lesson))],
    )


def lesson_edit(*, actor: Principal, lesson_id: int, text: str, reason: str) -> Memory:
    """A person corrects a lesson's text (admins, in the agent library): a new version with the
    person as its author, the old text kept in its history, a required reason. Restorable."""
    _require_admin(actor, "edit lessons")
    text = clean_text(text, "text", max_length=MAX_LESSON)
    reason = clean_text(reason, "reason", max_length=MAX_REASON)
    with transaction.atomic():
        probe = (
            Memory.objects.filter(pk=lesson_id, skill__isnull=False).select_related("owner", "skill").first()
        )
        if probe is None:
            raise NotFound(f"There is no live lesson {lesson_id}.", lesson=lesson_id)
        link = _lock_link(probe.owner, probe.skill)
        lesson = _lock_lesson(lesson_id)
        others = [m for m in overlay_lessons(lesson.owner, lesson.skill) if m.pk != lesson.pk]
        used = sum(lesson_tokens(m.text) for m in others) + lesson_tokens(text)
        if used > overlay_budget_tokens():
            raise Invalid(
                {
                    "text": f"The overlay would count {used:,} tokens; its budget is {overlay_budget_tokens():,}."
                }
            )
        before = block_snapshot(lesson)
        from_version = memory_text_revise(actor=actor, memory=lesson, text=text, reason=reason)
        _lesson_audit(
            "lesson.edited",
            actor=actor,
            lesson=lesson,
            before=before,
            reason=reason,
            data={
                "from_version": from_version,
                "version": lesson.version,
                "content_hash": lesson.content_hash,
            },
        )
        if link is not None:
            _touch(link, actor, "lesson edited")
    return lesson


def lesson_remove(*, actor: Principal, lesson_id: int, reason: str) -> Memory:
    """A person takes a lesson out of its overlay (admins): the memory is retired
    (invalidated), its row and history kept, so the Audit tab restores it. A reason is
    required."""
    _require_admin(actor, "remove lessons")
    reason = clean_text(reason, "reason", max_length=MAX_REASON)
    with transaction.atomic():
        probe = (
            Memory.objects.filter(pk=lesson_id, skill__isnull=False).select_related("owner", "skill").first()
        )
        if probe is None:
            raise NotFound(f"There is no live lesson {lesson_id}.", lesson=lesson_id)
        link = _lock_link(probe.owner, probe.skill)
        lesson = _lock_lesson(lesson_id)
        before = block_snapshot(lesson)
        memory_row_state(
            lesson,
            status=Memory.INVALIDATED,
            queue_reason="",
            status_reason=f"removed from the overlay by {_author(actor)}: {reason}",
            valid_to=lesson.valid_to or timezone.now(),
        )
        _lesson_audit("lesson.removed", actor=actor, lesson=lesson, before=before, reason=reason)
        if link is not None:
            _touch(link, actor, "lesson removed")
    return lesson


def lesson_reorder(*, actor: Principal, agent: Agent, skill: Skill, order) -> list[Memory]:
    """Put the overlay's live lessons in the given order (a list of all their ids); positions
    become 0..n-1. Admins only; audited with each moved lesson's before/after."""
    _require_admin(actor, "reorder lessons")
    if not isinstance(order, list | tuple) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in order
    ):
        raise Invalid({"order": "A list of lesson ids."})
    with transaction.atomic():
        link = _lock_link(agent, skill)
        lessons = overlay_lessons(agent, skill, lock=True)
        if sorted(order) != sorted(m.pk for m in lessons) or len(set(order)) != len(order):
            raise Invalid({"order": "Name every live lesson of the overlay exactly once."})
        by_id = {m.pk: m for m in lessons}
        revisions = []
        for position, lesson_id in enumerate(order):
            lesson = by_id[lesson_id]
            if lesson.position != position:
                before = snapshot(lesson)
                lesson.position = position
                lesson.save(update_fields=["position", "updated_at"])
                revisions.append(("memory", lesson.pk, before, snapshot(lesson)))
        if revisions:
            audit_record(
                "lesson.reordered",
                actor=actor,
                store=LESSON_STORE,
                owner=agent.name,
                object_type="memory",
                object_ids=[r[1] for r in revisions],
                data={"skill": skill.name, "order": list(order)},
                revisions=revisions,
            )
            if link is not None:
                _touch(link, actor, "lessons reordered")
    return [by_id[i] for i in order]


def lesson_move(*, actor: Principal, lesson_id: int, offset: int) -> list[Memory]:
    """Move one lesson up (offset -1) or down (+1) in its overlay (the console's buttons)."""
    lesson = (
        Memory.objects.filter(pk=lesson_id, skill__isnull=False, status__in=Memory.LIVE)
        .select_related("owner", "skill")
        .first()
    )
    if lesson is None:
        raise NotFound(f"There is no live lesson {lesson_id}.", lesson=lesson_id)
    ids = [m.pk for m in overlay_lessons(lesson.owner, lesson.skill)]
    i = ids.index(lesson.pk)
    j = max(0, min(len(ids) - 1, i + offset))
    ids.insert(j, ids.pop(i))
    return lesson_reorder(actor=actor, agent=lesson.owner, skill=lesson.skill, order=ids)
