"""Console: erase what the API erases ("Erase…" on a memory's, entry's, material's or message's
page, "Forget this person" from a message they said or by name), each behind a preview of exactly
what goes and a typed confirmation (admins only)."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse

from knowledge.erasure.forms import EraseForm
from knowledge.erasure.selectors import KINDS, erasure_plan, erasure_target, erasures_recent
from knowledge.erasure.services import erasure_apply
from knowledge.errors import Conflict, NotFound
from knowledge.models import Erasure, Message
from knowledge.principals.permissions import admin_required
from knowledge.web import error_text

CONFIRM_WORD = "ERASE"


@admin_required
def erasure_index(request):
    """The ledger (newest first) and the door to forget a person by name."""
    name = request.GET.get("person", "").strip()
    if name:
        return redirect("erase", kind=Erasure.PERSON, ref=name)
    return render(request, "knowledge/erasure/index.html", {"erasures": erasures_recent()})


@admin_required
def erase(request, kind: str, ref: str):
    """GET: the preview and the form. POST: erase when the typed confirmation matches (the name of
    a person or channel, else the word ERASE); else the preview again with the form's error,
    nothing written."""
    if kind not in KINDS:
        raise NotFound(f"Nothing of kind {kind} can be erased.")
    row = erasure_target(request.principal, kind=kind, ref=ref)
    expected = ref if kind in (Erasure.PERSON, Erasure.CHANNEL) else CONFIRM_WORD
    form = EraseForm(request.POST or None, expected=expected)
    speaker = row.speaker_person if isinstance(row, Message) else None
    context = {"kind": kind, "ref": ref, "expected": expected, "form": form, "speaker": speaker}
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
