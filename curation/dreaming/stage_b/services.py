"""Stage B's writes: claim an agent, scan its new material, open what the scan picked, ask for
operations, apply the code rules (operations.check), and apply what is left in ONE transaction —
entries, blocks, relations, overlay lessons, the pinned memo, their audit events (each carrying
the run id) and the agent's cursor. Every write goes through the existing services; new blocks
and lessons pass the one activation function with route "dreaming" (active at once). An
operation a service refuses is dropped with its reason like one the rules refuse; a model
failure, an invalid reply or a database error writes nothing and advances nothing; an outage
(the model server does not answer) defers the run, which runs again later on the same material
(knowledge.llm.outage, runs.run_defer).

The model is called outside any transaction."""

import uuid

from django.db import DatabaseError, transaction
from django.utils import timezone

from curation.dreaming.runs import ACTOR, RunDeferred, RunFailed, run_count_call, run_open, run_through
from curation.dreaming.stage_b import operations, rules
from curation.dreaming.stage_b.selectors import open_picked, scan_lines, scan_read
from curation.models import DreamingRun, StageBCursor
from knowledge.audit.services import audit_record, current_batch_id, current_dreaming_run
from knowledge.errors import Conflict, DomainError, Invalid
from knowledge.llm import LIGHT, ModelError, fits, model_ask, model_availability, outage, reply_budget
from knowledge.models import Agent, Entry
from memory.recall.memo import memo_budget_tokens

REPLY_TOKENS = 6000
SCAN_REPLY_TOKENS = 1000
REFUSALS = (DomainError,)  # a service said no: drop the operation, keep the rest


class AgentBusy(Conflict):
    """Another stage B run holds the agent; nothing was started."""


def stage_b_run(*, agent: Agent, trigger: str, started_by: str = "", deferrals: int = 0) -> DreamingRun:
    """Curate one agent's knowledge from its new material (one scan call, one propose call, one
    transaction). Returns the run: done (with what was applied and what was dropped and why),
    failed (nothing written, the cursor did not move) or skipped (the light model is
    unavailable, with the reason) or deferred (its server does not answer: `deferrals` in a row
    so far). Raises AgentBusy while another run holds the agent."""
    down = outage(profile=LIGHT, agent=agent)
    unavailable = "" if down else model_availability(LIGHT, agent=agent)
    run, cursor = run_open(
        stage=DreamingRun.STAGE_B,
        owner="agent",
        of=agent,
        cursor_model=StageBCursor,
        trigger=trigger,
        started_by=started_by,
        unavailable=unavailable and f"stage B did not run: the light model is {unavailable}",
        busy=AgentBusy(f"another stage B run is curating agent {agent.name}"),
    )
    if cursor is None:
        return run
    return run_through(
        run,
        StageBCursor,
        agent.pk,
        lambda: _curate(run, agent, cursor),
        down=down,
        resume="curation.dreaming.tasks.stage_b_agent",
        deferrals=deferrals,
    )


def _call(
    run: DreamingRun,
    agent: Agent,
    *,
    purpose: str,
    messages: list[dict],
    schema: dict,
    max_tokens: int,
    check=None,
):
    try:
        reply = model_ask(
            purpose=purpose,
            messages=messages,
            schema=schema,
            profile=LIGHT,
            agent=agent,
            actor=ACTOR,
            max_tokens=max_tokens,
            check=check,
        )
    except ModelError as exc:
        for usage_id in exc.usage_ids or [None]:
            run_count_call(run, usage_id)
        if outage(exc):
            raise RunDeferred(exc.reason) from None
        raise RunFailed(exc.reason) from None
    for usage_id in reply.usage_ids:
        run_count_call(run, usage_id)
    return reply


def _scan_fitted(agent: Agent, scan, reply_tokens: int) -> list[dict]:
    """The scan prompt, fitted to the light model's context: entries of the index first, then
    the newest episodes and task outcomes are left out (and stay past the cursor: a run moves
    the cursor only over what its scan was shown)."""
    while True:
        messages = rules.scan_prompt(agent=agent.name, **scan_lines(scan))
        if fits(messages, reply_tokens, LIGHT, agent=agent):
            return messages
        if len(scan.entries) > 1:
            scan.entries = scan.entries[: len(scan.entries) // 2]
        elif len(scan.episodes) + len(scan.outcomes) > 1:
            scan.episodes = scan.episodes[: max(len(scan.episodes) // 2, 1 if not scan.outcomes else 0)]
            scan.outcomes = scan.outcomes[: max(len(scan.outcomes) // 2, 1 if not scan.episodes else 0)]
        else:
            return messages  # one item that does not fit: sent, refused, and the run says why


def _sections_fitted(sections: dict[str, list[str]], build, reply_tokens: int, agent: Agent):
    """The propose prompt, fitted: the longest section loses lines from its end until it fits."""
    sections = {k: list(v) for k, v in sections.items()}
    while True:
        messages = build(sections)
        if fits(messages, reply_tokens, LIGHT, agent=agent):
            return messages
        longest = max(sections, key=lambda k: sum(len(line) for line in sections[k]))
        if not sections[longest]:
            return messages
        del sections[longest][len(sections[longest]) // 2 :]


def _curate(run: DreamingRun, agent: Agent, cursor: StageBCursor) -> str:
    scan = scan_read(agent, cursor)
    if scan.empty:
        return "nothing new since the last run"
    scan_tokens = reply_budget(SCAN_REPLY_TOKENS, LIGHT, agent=agent)
    messages = _scan_fitted(agent, scan, scan_tokens)
    shown = dict(
        episodes={e.pk for e in scan.episodes},
        outcomes={o.pk for o in scan.outcomes},
        entries={e.pk for e in scan.entries},
    )
    picked = _call(
        run,
        agent,
        purpose="dreaming.stage_b.scan",
        messages=messages,
        schema=rules.SCAN_SCHEMA,
        max_tokens=scan_tokens,
        check=lambda data: rules.scan_breach(data, **shown),
    ).data
    opened, sections = open_picked(agent, scan, picked)
    proposed = []
    if opened.episodes or opened.outcomes or opened.entries:
        propose_tokens = reply_budget(REPLY_TOKENS, LIGHT, agent=agent)

        def build(parts):
            return rules.propose_prompt(
                agent=agent.name,
                today=timezone.now().date(),
                types=opened.types,
                stores=opened.stores,
                memo_budget=memo_budget_tokens(),
                sections=parts,
            )

        proposed = _call(
            run,
            agent,
            purpose="dreaming.stage_b.propose",
            messages=_sections_fitted(sections, build, propose_tokens, agent),
            schema=rules.PROPOSE_SCHEMA,
            max_tokens=propose_tokens,
        ).data["operations"]
    kept, dropped = operations.check(proposed, opened, run=run.pk, today=timezone.now().date())
    try:
        _apply(run, agent, cursor, scan, opened, kept, dropped)
    except DatabaseError as exc:
        raise RunFailed(f"database error, nothing written: {exc}".strip()) from None
    return ""


def _apply(run, agent, cursor_before, scan, opened, kept, dropped) -> None:
    """Apply the checked operations and move the cursor, all in one transaction. Each operation
    runs in a savepoint: one a service refuses is rolled back alone and recorded as dropped."""
    created: dict[str, Entry] = {}
    applied = {"operations": 0, "skill_updates": 0}
    run_token = current_dreaming_run.set(run.pk)
    batch_token = current_batch_id.set(uuid.uuid4())
    try:
        with transaction.atomic():
            cursor = StageBCursor.objects.select_for_update().get(pk=agent.pk)
            if cursor.run_id != run.pk:
                raise RunFailed("another run took the agent over; nothing was written")
            if (cursor.episode_id, cursor.outcome_id) != (cursor_before.episode_id, cursor_before.outcome_id):
                raise RunFailed("the cursor moved while the model was reading; nothing was written")
            for position, op in kept:
                try:
                    with transaction.atomic():
                        counter = operations.apply_one(run, agent, op, created)
                except REFUSALS as exc:
                    dropped.append({"op": position, "kind": op["op"], "reason": refusal_text(exc)})
                else:
                    applied[counter] += 1
            dropped.sort(key=lambda d: d["op"])
            if scan.episodes:
                cursor.episode_id = max(e.pk for e in scan.episodes)
            if scan.outcomes:
                cursor.outcome_id = max(o.pk for o in scan.outcomes)
            cursor.save(update_fields=["episode_id", "outcome_id", "updated_at"])
            materials = len(scan.episodes) + len(scan.outcomes)
            DreamingRun.objects.filter(pk=run.pk).update(
                batches=1,
                materials=materials,
                episodes=len(opened.episodes),
                messages=len(opened.messages),
                operations=applied["operations"],
                skill_updates=applied["skill_updates"],
                dropped=dropped,
            )
            audit_record(
                "dreaming.curated",
                actor=ACTOR,
                store="self",
                owner=agent.name,
                object_type="agent",
                object_ids=[agent.pk],
                counts={
                    "materials": materials,
                    "opened_episodes": len(opened.episodes),
                    "opened_messages": len(opened.messages),
                    "operations": applied["operations"],
                    "skill_updates": applied["skill_updates"],
                    "dropped": len(dropped),
                },
                data={
                    "episode_from": cursor_before.episode_id,
                    "episode_to": cursor.episode_id,
                    "outcome_from": cursor_before.outcome_id,
                    "outcome_to": cursor.outcome_id,
                    "usage": run.usage_ids,
                    "job": rules.VERSION,
                },
            )
    finally:
        current_dreaming_run.reset(run_token)
        current_batch_id.reset(batch_token)


def refusal_text(exc: Exception) -> str:
    detail = getattr(exc, "detail", None) or str(exc)
    if isinstance(exc, Invalid) and isinstance(detail, dict):
        return "; ".join(
            f"{k}: {' '.join(map(str, v if isinstance(v, list) else [v]))}" for k, v in detail.items()
        )
    if isinstance(detail, dict):
        detail = detail.get("detail", detail)
    return f"refused: {detail}"
