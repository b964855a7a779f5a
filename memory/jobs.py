"""The memory layer's model-backed runs as background jobs (knowledge.llm.jobs): a consolidation
run, a reconciler pass and an eval-gate check. Registered from MemoryConfig.ready()."""

from django.urls import reverse

from knowledge.llm.jobs import actor_from, job_kind_register
from knowledge.models import Agent


def consolidation_job(*, actor: dict, owner: int | None = None, store: str = "") -> dict:
    from memory.consolidation import consolidation_run

    plan = consolidation_run(
        actor=actor_from(actor),
        owner=Agent.objects.get(pk=owner) if owner else None,
        store=store,
    )
    groups = plan.counts.get("groups", 0)
    result = {
        "plan": plan.pk,
        "state": plan.state,
        "summary": f"Plan #{plan.pk} is {plan.state} ({groups} changes).",
    }
    if "deferred: " in (plan.model_note or ""):
        # an outage: its model work waits and the run comes back by itself (not done)
        result.update(state="deferred", summary=f"{result['summary']} {plan.model_note}"[:2000])
    return result


def reconcile_job(*, actor: dict, agent: int) -> dict:
    from memory.models import ReconcilerRun
    from memory.reconciler.services import reconciler_run

    owner = Agent.objects.get(pk=agent)
    run = reconciler_run(actor=actor_from(actor), agent=owner, trigger=ReconcilerRun.MANUAL)
    plan = run.plan
    groups = plan.counts.get("groups", 0) if plan else 0
    result = {
        "reconciler_run": run.pk,
        "plan": run.plan_id,
        "agent": owner.name,
        "summary": f"Reconciled {owner.name}: plan #{run.plan_id} is {plan.state if plan else '—'} ({groups} changes).",
    }
    if run.counts.get("digests_deferred") or run.counts.get("conflicts_deferred"):
        # an outage: its model work waits and the pass comes back by itself (not done)
        result.update(state="deferred", summary=f"{result['summary']} {run.note}"[:2000])
    return result


def gate_check_job(*, check: int) -> dict:
    from memory.lifecycle.gated import gate_check_settle_run

    return gate_check_settle_run(check)


def register() -> None:
    job_kind_register(
        "consolidation.run",
        consolidation_job,
        title="Consolidation run",
        link=lambda r: reverse("consolidation-detail", args=[r["plan"]]) if r.get("plan") else "",
    )
    job_kind_register(
        "reconciler.run",
        reconcile_job,
        title="Reconcile now",
        link=lambda r: reverse("consolidation-detail", args=[r["plan"]]) if r.get("plan") else "",
    )
    job_kind_register(
        "gate.check",
        gate_check_job,
        title="Eval gate check",
        link=lambda r: reverse("memory-detail", args=[r["memory"]]) if r.get("memory") else "",
    )
