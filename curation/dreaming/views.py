"""Console: run stage A for one channel now, from the Status tab's stage A section (admins); the
Knowledge page's Dreaming tab (stage B: run curation now, results, runs, restore a run, fitness)."""

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from curation.dreaming.runs import run_request
from curation.models import DreamingRun
from knowledge import names
from knowledge.errors import Conflict, DomainError
from knowledge.models import AuditEvent
from knowledge.principals.permissions import admin_required, reviewer_required


@admin_required
@require_POST
def stage_a_run_page(request, name):
    """Queue a stage A run for the channel and show its progress (the model is never waited
    for inside the request)."""
    channel = names.channel_named(name)
    try:
        job = run_request(stage=DreamingRun.STAGE_A, of=channel, actor=request.principal)
    except Conflict as exc:
        messages.error(request, exc.message)
        return redirect("knowledge-status")
    return redirect("model-job", job_id=job.pk)


# --- the Knowledge page's Dreaming tab (stage B) -------------------------------------------------


def _agent_of(request):
    return names.owner_selected(
        request.GET.get("agent") or request.POST.get("agent") or request.session.get("owner")
    )


@reviewer_required
def dreaming_tab(request):
    from curation.dreaming.stage_b.selectors import fitness, stage_b_runs
    from knowledge.llm import LIGHT, model_availability
    from knowledge.models import Agent

    agent = _agent_of(request)
    result = None
    if run_id := request.GET.get("run", ""):
        result = DreamingRun.objects.filter(
            pk=run_id if run_id.isdigit() else 0, stage=DreamingRun.STAGE_B
        ).first()
    runs = list(stage_b_runs(agent=agent, limit=30))
    context = {
        "tab": "dreaming",
        "agents": Agent.objects.order_by("name"),
        "agent": agent,
        "unavailable": model_availability(LIGHT, agent=agent),
        "result": result,
        "runs": runs,
        "fitness": fitness(agent=agent),
        "mature_days": settings.BRAIN_DREAMING_MATURE_DAYS,
        "can_run": request.principal.is_admin,
    }
    return render(request, "curation/dreaming/tab.html", context)


@admin_required
@require_POST
def dreaming_run_now(request):
    """Queue a stage B run for the agent and show its progress."""
    agent = _agent_of(request)
    if agent is None:
        messages.error(request, "Pick an agent first.")
        return redirect("dreaming-tab")
    try:
        job = run_request(stage=DreamingRun.STAGE_B, of=agent, actor=request.principal)
    except Conflict as exc:
        messages.error(request, exc.message)
        return redirect(f"{reverse('dreaming-tab')}?agent={agent.name}")
    return redirect("model-job", job_id=job.pk)


@admin_required
@require_POST
def dreaming_run_restore(request, run_id):
    """Undo everything one run changed, as one atomic batch (the restore rules: newest first;
    nothing is written if any value changed since)."""
    from knowledge.restore.services import RestoreConflict, audit_restore

    run = get_object_or_404(DreamingRun, pk=run_id, stage=DreamingRun.STAGE_B)
    events = list(
        AuditEvent.objects.filter(dreaming_run=run.pk, revisions__isnull=False)
        .distinct()
        .values_list("pk", flat=True)
    )
    target = f"{reverse('dreaming-tab')}?agent={run.agent.name}&run={run.pk}"
    if not events:
        messages.error(request, f"Run {run.pk} changed nothing that could be restored.")
        return redirect(target)
    try:
        plan = audit_restore(actor=request.principal, event_ids=events)
    except RestoreConflict as exc:
        changed = "; ".join(c["message"] for c in exc.conflicts)
        messages.error(
            request, f"Run {run.pk} was not restored; nothing was written. Changed since: {changed}"
        )
    except DomainError as exc:
        messages.error(request, f"Run {run.pk} was not restored: {exc.detail}")
    else:
        messages.success(
            request,
            f"Run {run.pk} restored: {len(plan.steps)} change(s) of {len(events)} event(s) undone as one "
            f"batch (audit event {plan.event.pk}).",
        )
    return redirect(target)
