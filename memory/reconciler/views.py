"""Console: "Reconcile now" for one agent (reviewers and admins), and the agent page's panel."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render

from knowledge.models import Agent
from knowledge.principals.permissions import reviewer_required
from memory.consolidation import PlanConflict
from memory.reconciler.models import ReconcilerRun
from memory.reconciler.selectors import last_run, reconciler_due
from memory.reconciler.services import reconciler_run


@reviewer_required
def reconcile_now(request, name):
    """GET: the agent page's reconciler panel (last run, due or not). POST: run a pass now,
    then back to the agent page (or the panel, for htmx)."""
    agent = get_object_or_404(Agent, name=name)
    if request.method == "POST":
        try:
            run = reconciler_run(actor=request.principal, agent=agent, trigger=ReconcilerRun.MANUAL)
        except PlanConflict as exc:
            messages.error(request, exc.message)
        else:
            plan = run.plan
            messages.success(
                request,
                f"Reconciled {agent.name}: plan #{plan.pk} is {plan.state} "
                f"({plan.counts.get('groups', 0)} change{'s' if plan.counts.get('groups', 0) != 1 else ''}).",
            )
        if not request.htmx:
            return redirect("agent-detail", name=name)
    trigger, turns = reconciler_due(agent)
    return render(
        request,
        "memory/reconciler/panel.html" if request.htmx else "memory/reconciler/page.html",
        {"agent": agent, "run": last_run(agent), "due": trigger, "turns": turns},
    )
