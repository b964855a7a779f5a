"""Running the reconciler over one agent: its findings become a consolidation plan (the one
change mechanism: nothing deleted, exact revert, audited by ids) honouring
BRAIN_MEMORY_CONSOLIDATION, and the pass is recorded as a ReconcilerRun."""

from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import audit_record
from knowledge.llm import defer_later, deferral_pending, deferred_reason
from knowledge.models import Agent
from knowledge.principal import Principal
from knowledge.settings_store import setting_get
from memory.consolidation import ConsolidationBusy, ConsolidationOff, consolidation_run
from memory.models import ReconcilerRun
from memory.reconciler.find import JOBS, reconcile_find
from memory.reconciler.selectors import RESUME, deferral_name, reconciler_deferred

CREATED_BY = "system:reconciler"


def _since(agent: Agent):
    last = ReconcilerRun.objects.filter(agent=agent, state=ReconcilerRun.DONE).order_by("-started_at").first()
    return last.started_at if last else None


def reconciler_run(
    *,
    actor: Principal,
    agent: Agent,
    trigger: str,
    jobs=JOBS,
    turns: int = 0,
    mode: str | None = None,
    now=None,
    deferrals: int = 0,
) -> ReconcilerRun:
    """One reconciler pass over `agent`: find (model calls outside any write transaction), write
    the plan, apply it in apply mode. Mode off raises ConsolidationOff and another plan running
    raises ConsolidationBusy; both are recorded as a skipped run. When the model server does not
    answer (an outage), what needs no model is written and the pass is deferred
    (`reconciler_defer`; `deferrals`: outages in a row so far). Returns the run."""
    now = now or timezone.now()
    mode = mode or setting_get("BRAIN_MEMORY_CONSOLIDATION")
    since = _since(agent)
    run = ReconcilerRun.objects.create(agent=agent, trigger=trigger, turns=turns, started_at=now)
    found = []

    def find(*, owner_id, store, actor, now):
        found.append(reconcile_find(owner_id=owner_id, jobs=jobs, since=since, actor=actor, now=now))
        return found[-1]

    try:
        plan = consolidation_run(
            actor=actor, owner=agent, mode=mode, now=now, find=find, created_by=CREATED_BY
        )
    except (ConsolidationOff, ConsolidationBusy) as exc:
        _finish(run, state=ReconcilerRun.SKIPPED, note=exc.message, actor=actor)
        raise
    except Exception as exc:
        _finish(run, state=ReconcilerRun.FAILED, note=f"{type(exc).__name__}: {exc}"[:1000], actor=actor)
        raise
    note = plan.model_note or ""
    if plan.error:
        note = f"{note}; {plan.error}" if note else plan.error
    if found and found[-1].deferred:
        at = reconciler_defer(agent=agent, trigger=trigger, jobs=jobs, deferrals=deferrals)
        note = f"{note}; {deferred_reason(found[-1].deferred)}, again from {at:%Y-%m-%d %H:%M:%S} UTC"
    run.plan = plan
    run.counts = plan.counts
    _finish(run, state=ReconcilerRun.DONE, note=note, actor=actor)
    return run


def reconciler_defer(*, agent: Agent, trigger: str, jobs, deferrals: int):
    """Ask for the pass again (the same jobs) after the back-off of its next deferral; once:
    while one waits no second is asked for. Returns when it runs."""
    waiting = deferral_pending(RESUME, what=deferral_name(agent.pk))
    return waiting or defer_later(
        RESUME, agent.pk, trigger, list(jobs), deferrals=deferrals + 1, what=deferral_name(agent.pk)
    )


def _finish(run: ReconcilerRun, *, state: str, note: str, actor) -> None:
    with transaction.atomic():
        run.state, run.note, run.finished_at = state, note, timezone.now()
        run.save(update_fields=["state", "note", "finished_at", "plan", "counts"])
        audit_record(
            "memory.reconciler.run",
            actor=actor,
            owner=run.agent.name,
            object_type="reconciler_run",
            object_ids=[run.pk],
            reason=note,
            counts=run.counts,
            data={"trigger": run.trigger, "state": state, "plan": run.plan_id},
        )


def reconciler_decay_due(*, actor: Principal | None = None, now=None) -> int:
    """Before short-term expiry: a digest pass for every agent holding episodic memories of a
    conversation past their expiry, so they are summarised rather than dropped. With
    consolidation off (or another plan running) they simply expire. An agent whose pass waits
    for the model server is left to that deferral (expiry keeps its episodes meanwhile:
    `reconciler_waiting`). Returns the runs made."""
    from knowledge.models import Memory
    from memory.lifecycle.expiry import memories_in_open_plans as _in_open_plans

    actor = actor or Principal.system("reconciler")
    now = now or timezone.now()
    agent_ids = (
        Memory.objects.filter(
            status=Memory.ACTIVE, tier=Memory.EPISODIC, conversation__isnull=False, expires_at__lte=now
        )
        .exclude(pk__in=_in_open_plans())  # already in a digest waiting for review
        .values_list("owner_id", flat=True)
        .distinct()
    )
    made = 0
    for agent in Agent.objects.filter(pk__in=list(agent_ids)).order_by("pk"):
        if reconciler_deferred(agent.pk):  # its pass waits for the model server: not a second one
            continue
        try:
            reconciler_run(actor=actor, agent=agent, trigger=ReconcilerRun.EXPIRY, jobs=("digest",), now=now)
            made += 1
        except (ConsolidationOff, ConsolidationBusy):
            continue
    return made
