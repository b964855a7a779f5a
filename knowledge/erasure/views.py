"""Console: erase one memory ("Erase" on its page) or forget a person, each behind a preview of
exactly what goes and a typed confirmation (admins only)."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse

from knowledge.erasure.forms import EraseForm
from knowledge.erasure.selectors import erasure_plan, erasure_target, erasures_recent
from knowledge.erasure.services import erasure_apply
from knowledge.errors import Conflict
from knowledge.models import Erasure
from knowledge.principals.permissions import admin_required
from knowledge.web import error_text

CONFIRM_WORD = "ERASE"


@admin_required
def erasure_index(request):
    """The ledger (newest first) and the door to forget a person by name."""
    name = request.GET.get("person", "").strip()
    if name:
        return redirect("erase-person", name=name)
    return render(request, "knowledge/erasure/index.html", {"erasures": erasures_recent()})


@admin_required
def erase_memory(request, memory_id: int):
    return _erase(request, kind=Erasure.MEMORY, ref=str(memory_id), expected=CONFIRM_WORD)


@admin_required
def erase_person(request, name: str):
    return _erase(request, kind=Erasure.PERSON, ref=name, expected=name)


def _erase(request, *, kind: str, ref: str, expected: str):
    """GET: the preview and the form. POST: erase when the typed confirmation matches; else the
    preview again with the form's error, nothing written."""
    row = erasure_target(request.principal, kind=kind, ref=ref)
    form = EraseForm(request.POST or None, expected=expected)
    context = {"kind": kind, "ref": ref, "expected": expected, "form": form}
    if request.method == "POST" and form.is_valid():
        try:
            result = erasure_apply(
                actor=request.principal, kind=kind, ref=ref, reason=form.cleaned_data["reason"]
            )
        except Conflict as exc:
            context["error"] = error_text(exc)
        else:
            counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in result.plan.counts().items() if n)
            messages.success(
                request, f"Erased {result.plan.label} for good: {counts}. Ledger entry {result.erasure.pk}."
            )
            return redirect(reverse("erasures"))
    plan = erasure_plan(kind=kind, row=row)
    context.update(plan=plan.preview(), empty=plan.is_empty())
    status = (
        400 if request.method == "POST" and "error" not in context else 409 if "error" in context else 200
    )
    return render(request, "knowledge/erasure/erase.html", context, status=status)
