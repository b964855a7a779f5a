"""Console pages for provenance: the stale list and confirming a memory's sources."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from knowledge import access
from knowledge.models import Memory
from knowledge.principals.permissions import reviewer_required
from knowledge.settings_store import setting_get
from memory.provenance import services as provenance
from memory.provenance.selectors import stale_memories


@reviewer_required
def stale_list(request):
    memories = stale_memories(request.principal, agent=request.session.get("owner") or None)
    page = Paginator(memories, 25).get_page(request.GET.get("page"))
    return render(
        request,
        "memory/provenance/stale_list.html",
        {"page": page, "mode": setting_get("BRAIN_MEMORY_INVALIDATION")},
    )


@reviewer_required
@require_POST
def stale_check(request):
    counts = provenance.provenance_check(actor=request.principal)
    if counts["mode"] == "off":
        messages.warning(request, "Invalidation mode is off: nothing was checked.")
    else:
        messages.success(
            request,
            f"Checked {counts['checked']} sources: {counts['stale']} memories newly stale, "
            f"{counts['requeued']} requeued, {counts['invalidated']} invalidated.",
        )
    return redirect("stale-list")


@reviewer_required
@require_POST
def memory_confirm_sources(request, memory_id: int):
    memory = access.memory_get_for(request.principal, memory_id)
    provenance.memory_confirm_sources(
        actor=request.principal, memory_id=memory.pk, reason=request.POST.get("reason", "").strip()
    )
    messages.success(request, "Confirmed: its sources are re-baselined.")
    return redirect("memory-detail", memory_id=memory.pk)


@reviewer_required
def source_state(request, kind: str, ref: str):
    """The stored state of an external source (ticket, KB article, record) as its owning system
    last pushed it, and the memories that cite it that the reader may see. A source never
    pushed is shown as untracked: no change of it can be seen."""
    from knowledge.memories.fingerprints import EXTERNAL_KINDS
    from knowledge.models import SourceState

    if kind not in EXTERNAL_KINDS:
        raise Http404("Not an external source kind.")
    state = SourceState.objects.filter(kind=kind, ref=ref).first()
    citing = (
        Memory.objects.filter(
            access.memory_readable_q(request.principal), sources__kind=kind, sources__ref=ref
        )
        .select_related("owner")
        .order_by("-created_at")[:50]
    )
    return render(
        request,
        "memory/provenance/source_state.html",
        {"kind": kind, "ref": ref, "state": state, "citing": citing},
    )
