"""Console views of the memories pages: the list, one memory's page and the operator's actions
on it (pin, revoke, promote, revise), and the stale list's actions (its pages are
memory.provenance's; retiring is a lifecycle write). The review queue's views are
memory.lifecycle.views."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from knowledge import access
from knowledge.errors import Invalid
from knowledge.models import Memory
from knowledge.principals.permissions import reviewer_required
from knowledge.web import error_text
from memory.lifecycle import common, operate, selectors
from memory.lifecycle.forms import MemoryFilterForm, PromoteForm, ReviseForm, RevokeForm, first_error
from memory.links.selectors import memory_links
from memory.provenance import services as provenance
from memory.provenance.selectors import memory_provenance

PAGE_SIZE = 50


def _owner(request) -> str:
    return request.session.get("owner", "")


@vary_on_headers("HX-Request")
@reviewer_required
@require_GET
def memory_list(request):
    form = MemoryFilterForm(request.GET)
    filters = form.cleaned_data if form.is_valid() else {}
    qs = selectors.memory_list(
        request.principal,
        status=filters.get("status", ""),
        tier=filters.get("tier", ""),
        store=filters.get("store", ""),
        agent=_owner(request),
        q=filters.get("q", ""),
        stale=True if filters.get("stale") else None,
        pinned=True if filters.get("pinned") else None,
    )
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "stores": selectors.memory_stores(_owner(request)),
        "tiers": Memory.TIER_ORDER,
        "statuses": [s for s, _ in Memory.STATUSES],
        "filters": filters,
    }
    template = "memory/lifecycle/memory_list.html"
    if request.htmx and not request.htmx.boosted:
        template += "#results"
    return render(request, template, context)


def _detail_context(request, memory_id: int, **extra) -> dict:
    memory = access.memory_get_for(request.principal, memory_id)
    queue_item = (
        selectors.review_queue(ids=[memory.pk], principal=request.principal)[0]
        if memory.status == Memory.QUEUED
        else None
    )
    return {
        "memory": memory,
        "sources": list(memory.sources.all()),
        "versions": selectors.memory_versions(memory),
        "chain": selectors.supersession_chain(memory),
        "history": selectors.memory_audit_history(memory),
        "dependants": selectors.memory_dependants(memory),
        "provenance": memory_provenance(memory, request.principal),
        "gate_check": memory.gate_checks.exclude(verdict__in=["pending", "running"]).first(),
        "queue_item": queue_item,
        "promote_form": PromoteForm(),
        "tiers_above": Memory.TIER_ORDER[Memory.TIER_ORDER.index(memory.tier) + 1 :],
        "links": memory_links(memory, principal=request.principal),
        **extra,
    }


@vary_on_headers("HX-Request")
@reviewer_required
@require_GET
def memory_detail(request, memory_id: int):
    template = "memory/lifecycle/memory_detail.html"
    if request.htmx:
        template += "#detail"
    return render(request, template, _detail_context(request, memory_id))


def _operate(request, memory_id: int, service, done: str, **kwargs):
    """Run an operator action from the detail page; htmx gets the page's detail fragment."""
    notice, kind = done, "success"
    try:
        service(actor=request.principal, memory_id=memory_id, **kwargs)
    except (common.MemoryStateConflict, Invalid) as exc:
        notice, kind = error_text(exc), "error"
    return _operate_response(request, memory_id, notice, kind)


def _operate_response(request, memory_id: int, notice: str, kind: str):
    if request.htmx:
        context = _detail_context(request, memory_id, notice=notice, notice_kind=kind)
        return render(request, "memory/lifecycle/memory_detail.html#detail", context)
    getattr(messages, kind)(request, notice)
    return redirect("memory-detail", memory_id=memory_id)


@reviewer_required
@require_POST
def memory_pin(request, memory_id: int):
    if request.POST.get("action") == "unpin":
        return _operate(request, memory_id, operate.memory_unpin, "Unpinned.")
    return _operate(request, memory_id, operate.memory_pin, "Pinned.")


@reviewer_required
@require_POST
def memory_revoke(request, memory_id: int):
    form = RevokeForm(request.POST)
    if not form.is_valid():
        return _operate_response(request, memory_id, first_error(form), "error")
    return _operate(request, memory_id, operate.memory_revoke, "Revoked.", reason=form.cleaned_data["reason"])


@reviewer_required
@require_POST
def memory_promote(request, memory_id: int):
    form = PromoteForm(request.POST)
    if not form.is_valid():
        return _operate_response(request, memory_id, first_error(form), "error")
    return _operate(
        request,
        memory_id,
        operate.memory_promote,
        "Promoted.",
        tier=form.cleaned_data["tier"] or None,
        confidence=form.cleaned_data["confidence"],
    )


@reviewer_required
@require_POST
def memory_revise(request, memory_id: int):
    form = ReviseForm(request.POST)
    if not form.is_valid():
        return _operate_response(request, memory_id, first_error(form), "error")
    return _operate(
        request,
        memory_id,
        operate.memory_revise,
        "Saved as a new version.",
        text=form.cleaned_data["text"],
        reason=form.cleaned_data["reason"],
    )


@reviewer_required
@require_POST
def stale_action(request, memory_id: int):
    """Confirm a stale memory still holds, or retire it (revoke, reason required)."""
    memory = access.memory_get_for(request.principal, memory_id)
    action, reason = request.POST.get("action"), request.POST.get("reason", "").strip()
    error = done = ""
    try:
        if action == "confirm":
            provenance.memory_confirm_sources(actor=request.principal, memory_id=memory.pk, reason=reason)
            done = "confirmed: its sources are re-baselined"
        elif action == "retire":
            operate.memory_revoke(actor=request.principal, memory_id=memory.pk, reason=reason)
            done = "retired"
        else:
            raise Http404("Unknown action.")
    except Invalid as exc:
        error = error_text(exc)
    except common.MemoryStateConflict as exc:
        error = str(exc)
    memory = Memory.objects.select_related("owner").get(pk=memory.pk)
    if request.htmx:
        return render(
            request, "memory/provenance/stale_list.html#row", {"m": memory, "done": done, "error": error}
        )
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Memory #{memory.pk} {done}.")
    return redirect("stale-list")
