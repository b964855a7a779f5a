"""Console: "Reconcile now" for one agent (reviewers and admins), and the agent page's panel."""

from django.contrib import messages
from django.shortcuts import redirect, render

from knowledge import names
from knowledge.principals.permissions import reviewer_required
from memory.consolidation import PlanConflict
from memory.consolidation.runs import reconcile_enqueue
from memory.reconciler.selectors import last_run, reconciler_due


@reviewer_required
def reconcile_now(request, name):
    """GET: the agent page's reconciler panel (last run, due or not). POST: run a pass now,
    then back to the agent page (or the panel, for htmx)."""
    agent = names.agent_named(name)
    job_context = {}  # the queued pass, shown in the panel and polled until done
    if request.method == "POST":
        try:
            job = reconcile_enqueue(actor=request.principal, agent=agent)
        except PlanConflict as exc:
            messages.error(request, exc.message)
        else:
            if not request.htmx:
                return redirect("model-job", job_id=job.pk)
            from knowledge.llm.jobs import job_link, job_title

            job_context = {"job": job, "title": job_title(job), "link": job_link(job)}
        if not request.htmx:
            return redirect("agent-detail", name=name)
    trigger, turns = reconciler_due(agent)
    return render(
        request,
        "memory/reconciler/panel.html" if request.htmx else "memory/reconciler/page.html",
        {"agent": agent, "run": last_run(agent), "due": trigger, "turns": turns, **job_context},
    )
