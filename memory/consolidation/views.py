"""Console: consolidation plans — the list, one plan before → after, and its actions."""

from django.conf import settings
from django.contrib import messages
from django.db.models import Q
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from knowledge import names
from knowledge.llm import LIGHT, model_availability
from knowledge.principals.permissions import reviewer_required
from knowledge.settings_store import setting_get
from memory.consolidation import (
    PlanConflict,
    plan_apply,
    plan_detail,
    plan_discard,
    plan_list,
    plan_revert,
)
from memory.consolidation.runs import consolidation_enqueue
from memory.models import ConsolidationPlan

ACTIONS = {"apply": plan_apply, "revert": plan_revert, "discard": plan_discard}
DONE = {"apply": "applied", "revert": "reverted", "discard": "discarded"}


@vary_on_headers("HX-Request")
@reviewer_required
def plan_list_page(request):
    state = request.GET.get("state", "")
    if state not in dict(ConsolidationPlan.STATES):
        state = ""
    plans = plan_list(state=state)
    # The owner selector: that agent's plans and the plans that covered every owner.
    owner = names.owner_selected(request.session.get("owner"))
    if owner:
        plans = plans.filter(Q(owner=owner) | Q(owner__isnull=True))
    context = {
        "plans": plans[:100],
        "owner": owner,
        "state": state,
        "states": [s for s, _ in ConsolidationPlan.STATES],
        "mode": setting_get("BRAIN_MEMORY_CONSOLIDATION"),
        "model_unavailable": model_availability(LIGHT),
        "summary_over": settings.BRAIN_CONSOLIDATION_SUMMARY_OVER,
    }
    template = "memory/consolidation/consolidation_list.html"
    if request.htmx and request.htmx.target == "plans":
        template += "#plans"
    return render(request, template, context)


@reviewer_required
@require_POST
def plan_run(request):
    """Queue a consolidation run and show its progress (it calls the model: never inside the
    request)."""
    try:
        job = consolidation_enqueue(actor=request.principal)
    except PlanConflict as exc:
        messages.error(request, exc.message)
        return redirect("consolidation-list")
    return redirect("model-job", job_id=job.pk)


def _plan_context(plan):
    return {
        "plan": plan,
        "groups": plan_detail(plan),
        "can_apply": plan.state == ConsolidationPlan.PROPOSED,
        "can_revert": plan.state == ConsolidationPlan.APPLIED,
    }


@reviewer_required
def plan_page(request, plan_id):
    plan = get_object_or_404(ConsolidationPlan.objects.select_related("owner"), pk=plan_id)
    return render(request, "memory/consolidation/consolidation_detail.html", _plan_context(plan))


@reviewer_required
@require_POST
def plan_action(request, plan_id, action):
    if action not in ACTIONS:
        raise Http404("No such action.")
    plan = get_object_or_404(ConsolidationPlan, pk=plan_id)
    kwargs = {"reason": request.POST.get("reason", "")[:500]} if action == "discard" else {}
    error = ""
    try:
        plan = ACTIONS[action](actor=request.principal, plan_id=plan.pk, **kwargs)
    except PlanConflict as exc:
        error = exc.message
    if request.htmx:
        plan.refresh_from_db()
        context = {**_plan_context(plan), "action_error": error, "action_done": "" if error else DONE[action]}
        return render(request, "memory/consolidation/consolidation_detail.html#plan", context)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Plan {plan.pk} {DONE[action]}.")
    return redirect("consolidation-detail", plan_id=plan.pk)
