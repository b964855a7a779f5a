"""Console: the models page — each profile's configuration (never its key), today's budget
use, per-agent budgets, and recent calls with their outcomes and errors."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from knowledge import names
from knowledge.llm import agent_model_set, model_profile_save, profile_resolve, profile_status
from knowledge.llm.forms import AgentModelForm, ModelProfileForm
from knowledge.llm.profiles import agents_usage_today, day_start, profile_names, recent_usage
from knowledge.models import ModelUsage
from knowledge.principals.permissions import admin_required, reviewer_required
from knowledge.web import console_write

FAILED = [ModelUsage.INVALID, ModelUsage.CUT, ModelUsage.ERROR, ModelUsage.TIMEOUT, ModelUsage.REFUSED]


def _calls(request):
    show = request.GET.get("show", "")
    calls = recent_usage(limit=100)
    if show == "failed":
        calls = ModelUsage.objects.select_related("agent").filter(outcome__in=FAILED)[:100]
    return show, calls


@vary_on_headers("HX-Request")
@reviewer_required
def model_list(request):
    show, calls = _calls(request)
    context = {"calls": calls, "show": show}
    template = "knowledge/llm/models.html"
    if request.htmx and request.htmx.target == "calls":
        return render(request, template + "#calls", context)
    context.update(
        profiles=[profile_status(profile_resolve(name)) for name in profile_names()],
        agents=agents_usage_today(),
        failed_today=ModelUsage.objects.filter(created_at__gte=day_start(), outcome__in=FAILED).count(),
        profile_form=ModelProfileForm(initial={"enabled": True}),
        agent_form=AgentModelForm(),
    )
    return render(request, template, context)


@admin_required
@require_POST
def model_profile_edit(request):
    form = ModelProfileForm(request.POST)
    if form.is_valid():
        with console_write(request, f"Profile {form.cleaned_data['name']} saved.") as write:
            model_profile_save(actor=request.principal, **form.service_kwargs())
        if write.ok:
            return redirect("model-list")
    else:
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    return redirect("model-list")


@admin_required
@require_POST
def agent_model_edit(request, name):
    agent = names.agent_named(name)
    form = AgentModelForm(request.POST)
    if form.is_valid():
        agent_model_set(
            actor=request.principal,
            agent=agent,
            profile=form.cleaned_data["profile"],
            daily_calls=form.cleaned_data["daily_calls"],
            daily_tokens=form.cleaned_data["daily_tokens"],
        )
        messages.success(request, f"{agent.name} now uses profile {form.cleaned_data['profile']}.")
    else:
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    return redirect("model-list")


@reviewer_required
def model_job_panel(request, job_id: int):
    """One queued model-backed run: its state, polled by htmx while it is queued or running,
    and the link to its result when done. Without JavaScript the page reloads itself."""
    from knowledge.llm.jobs import job_link, job_title
    from knowledge.models import ModelJob

    job = get_object_or_404(ModelJob, pk=job_id)
    context = {"job": job, "title": job_title(job), "link": job_link(job)}
    template = "knowledge/llm/job.html" + ("#job-panel" if request.htmx else "")
    return render(request, template, context)
