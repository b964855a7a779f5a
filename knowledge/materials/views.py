"""Console: the Knowledge page's Materials tab (retained files and connector documents with
their learning state), "ask an agent to learn a source", a material's page (state, attempts,
download of the original, Retry / Learn again, the entries citing it), and the admins' signal
routing rules. Thin views over the same services and selectors as the API."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from knowledge import access, names
from knowledge.access import material_get_for
from knowledge.errors import DomainError, Invalid, NotFound
from knowledge.materials import grants, services, signals_routing
from knowledge.materials.forms import LearnForm
from knowledge.materials.selectors import citing_entries, materials_for
from knowledge.materials.storage import original_response
from knowledge.models import Agent, Integration, Material, SignalRule
from knowledge.principals.permissions import admin_required, reviewer_required
from knowledge.web import console_write

FINAL = (Material.LEARNED, Material.FAILED)


@reviewer_required
def material_list(request, form=None, status=200):
    owner = request.session.get("owner", "")
    qs = materials_for(request.principal, listed_only=True)
    if owner:
        qs = qs.filter(owner__name=owner)
    state = request.GET.get("state", "")
    if state in dict(Material.STATES):
        qs = qs.filter(state=state)
    return render(
        request,
        "knowledge/materials/list.html",
        {
            "tab": "materials",
            "materials": qs[:200],
            "agents": Agent.objects.order_by("name"),
            "states": [s for s, _ in Material.STATES],
            "state": state,
            "max_mb": services.max_bytes() // (1024 * 1024),
            "form": form or LearnForm(initial={"agent": owner, "scope": "shared"}),
        },
        status=status,
    )


@reviewer_required
@require_POST
def material_new(request):
    """Ask an agent to learn a source: a file (stored, then learned by a job), pasted text or
    pasted web content (an entry at once; the console opens it). A refusal is shown beside the
    field it concerns, with what was entered kept."""
    principal = request.principal
    form = LearnForm(request.POST, request.FILES)
    if not form.is_valid():
        return material_list(request, form=form, status=400)
    data = form.cleaned_data
    try:
        agent = names.owner_selected(data["agent"])
        if agent is None:
            raise Invalid({"agent": "Pick the agent that learns it."})
        store = access.parse_scope(data["scope"] or "shared")
        upload = data["file"]
        if upload is not None:
            material = services.material_upload(
                actor=principal,
                owner=agent,
                store=store,
                filename=upload.name or "",
                data=upload.read(),
                title=data["title"],
            )
            messages.success(request, f"Stored {material.title}; {agent.name} is learning it.")
            return redirect("material-page", pk=material.pk)
        text, html = data["text"], data["html"]
        material = services.material_paste(
            actor=principal,
            owner=agent,
            store=store,
            title=data["title"],
            text=text if not html else "",
            html=html,
        )
        messages.success(request, f"{agent.name} learned {material.title}.")
        return redirect("entry-edit", pk=material.entry.pk)
    except DomainError as exc:
        form.refusal_show(exc)
    except DjangoPermissionDenied as exc:
        form.add_error(None, str(exc) or "You may not ask this agent to learn into that store.")
    return material_list(request, form=form, status=400)


@reviewer_required
def material_page(request, pk):
    material = material_get_for(request.principal, pk)
    return render(
        request,
        "knowledge/materials/page.html",
        {
            "tab": "materials",
            "material": material,
            "versions": material.versions.order_by("-number"),
            "entries": citing_entries(request.principal, material),
            "final": material.state in FINAL,
        },
    )


@reviewer_required
def material_state(request, pk):
    """The state fragment the page polls while the material is queued or learning."""
    material = material_get_for(request.principal, pk)
    return render(
        request,
        "knowledge/materials/page.html#state",
        {
            "material": material,
            "entries": citing_entries(request.principal, material),
            "final": material.state in FINAL,
        },
    )


@reviewer_required
def material_download(request, pk):
    material = material_get_for(request.principal, pk)
    version = None
    if number := request.GET.get("version", ""):
        version = material.versions.filter(number=number).first() if number.isdigit() else None
        if version is None:
            raise NotFound("No such version.")
    return original_response(material, version)  # a missing original: Gone, the console's 410


@reviewer_required
@require_POST
def material_retry(request, pk):
    material = material_get_for(request.principal, pk)
    again = request.POST.get("again") == "1"
    with console_write(request, "Learning again." if again else "Retrying.") as write:
        material = services.material_retry(actor=request.principal, material=material, again=again)
        if material.state == Material.FAILED:  # not queued: the page's reason says why
            write.done = ""
            messages.error(request, f"Not queued: {material.reason}.")
    return redirect(reverse("material-page", args=[material.pk]))


@admin_required
def signal_rules(request):
    if request.method == "POST":
        rule_id = request.POST.get("rule") or None
        with console_write(request, "Rule saved; it applies to the next signals and conversations."):
            signals_routing.signal_rule_save(
                actor=request.principal,
                rule_id=int(rule_id) if rule_id and rule_id.isdigit() else None,
                source=_slug(request.POST.get("source", ""), "source"),
                type=request.POST.get("type", "").strip()[:64],
                channel=_slug(request.POST.get("channel", ""), "channel"),
                memory_scope="channel" if request.POST.get("memory_scope") == "channel" else "shared",
                learn=request.POST.get("learn") == "1",
            )
        return redirect("signal-rules")
    return render(
        request,
        "knowledge/materials/signal_rules.html",
        {"tab": "materials", "rules": SignalRule.objects.all()},
    )


def _slug(value: str, field: str) -> str:
    import re

    value = value.strip().lower()
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", value):
        raise DomainError(f"{field}: a lower-case slug (letters, digits, - and _).")
    return value


@admin_required
@require_POST
def signal_rule_delete(request, rule_id):
    with console_write(request, "Rule removed."):
        signals_routing.signal_rule_delete(actor=request.principal, rule_id=rule_id)
    return redirect("signal-rules")


@admin_required
def connector_grants(request):
    """Which stores each integration may mirror connector documents into (admins only)."""
    if request.method == "POST":
        with console_write(request, fields=False) as write:
            grant = grants.connector_grant_add(
                actor=request.principal,
                integration=request.POST.get("integration", ""),
                agent=request.POST.get("agent", ""),
                scope=request.POST.get("scope", "").strip() or "shared",
            )
            write.done = (
                f"{grant.integration.name} may mirror documents into {grant.agent.name}'s {grant.store}."
            )
        return redirect("connector-grants")
    return render(
        request,
        "knowledge/materials/connector_grants.html",
        {
            "tab": "materials",
            "grants": grants.connector_grants(),
            "integrations": Integration.objects.order_by("name"),
            "agents": Agent.objects.order_by("name"),
        },
    )


@admin_required
@require_POST
def connector_grant_delete(request, grant_id):
    with console_write(request, "Grant taken back."):
        grants.connector_grant_delete(actor=request.principal, grant_id=grant_id)
    return redirect("connector-grants")
