"""Console: the Knowledge page's Entries tab (search, filters, the curation guide) and the entry
editor (Edit, Projection and Audit tabs). Every editor action is a plain form post that also
answers htmx requests with the fragment it changed."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from knowledge import access, names
from knowledge.entries import services as entries
from knowledge.entries.forms import (
    BlockCorrectForm,
    BlockForm,
    EntryCreateForm,
    EntryMetaForm,
    GuideForm,
    RelationForm,
)
from knowledge.entries.graph import entry_citing, graph_data
from knowledge.entries.guides import guide_update
from knowledge.entries.projection import entry_markdown, render_markdown, source_url
from knowledge.entries.selectors import (
    entry_body,
    entry_filters_from,
    entry_history,
    entry_relations,
    entry_search,
    entry_types,
)
from knowledge.errors import Conflict, DomainError, Invalid, NotFound
from knowledge.limits import console_page
from knowledge.models import Agent, AuditEvent, CurationGuide, Entry, Memory, MemoryVersion
from knowledge.principal import ADMIN
from knowledge.principals.permissions import reviewer_required

EDIT = "knowledge/entries/edit.html"


def _form_errors(form, exc: DomainError) -> None:
    """Put a service's refusal on the form: per-field messages where the form has the field."""
    detail = exc.detail
    if isinstance(detail, dict):
        for field, msgs in detail.items():
            msgs = msgs if isinstance(msgs, list) else [msgs]
            for msg in msgs:
                if field in form.fields:
                    form.add_error(field, str(msg))
                else:  # a field the form does not show (e.g. "blocks"): say which
                    form.add_error(None, f"{field}: {msg}")
    else:
        for msg in detail if isinstance(detail, list) else [detail]:
            form.add_error(None, str(msg))


def _call(form, service, **kwargs):
    """Run a write service for a console form; bad input becomes form errors (None returned).
    A refusal is the console's 403 (knowledge.web.console_error)."""
    try:
        return service(**kwargs)
    except (Invalid, Conflict, NotFound) as exc:
        _form_errors(form, exc)
    return None


# --- Entries tab -------------------------------------------------------------------------------


@reviewer_required
def knowledge_home(request):
    return redirect("entry-list")


@vary_on_headers("HX-Request")
@reviewer_required
def entry_list(request):
    principal = request.principal
    owner = names.owner_selected(request.session.get("owner"))
    params = request.GET.copy()
    params["owner"] = owner.name if owner else ""
    error = ""
    try:
        filters = entry_filters_from(params, principal)
        page = console_page(request.GET.get("page"))
    except (Invalid, ValueError) as exc:
        error = "; ".join(
            f"{k}: {v[0]}" for k, v in getattr(exc, "detail", {"filter": ["Invalid value."]}).items()
        )
        filters, page = entry_filters_from({"owner": params["owner"]}, principal), 1
    result = entry_search(principal, filters, page=page, page_size=25)
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "result": result,
        "filters": filters,
        "error": error,
        "query": query.urlencode(),
        "owner_agent": owner,
        "types": entry_types(owner),
        "more_filters": any(
            request.GET.get(k)
            for k in ("type", "store", "author", "updated_after", "updated_before", "deleted")
        ),
    }
    template = "knowledge/entries/list.html"
    if request.htmx and request.htmx.target == "results":
        return render(request, template + "#results", context)
    if owner:
        guide = CurationGuide.for_owner(owner)
        context["guide"] = guide
        context["guide_form"] = _guide_form(guide)
    return render(request, template, context)


@reviewer_required
def entry_graph(request):
    """The map: entries as nodes, relations as edges, filtered by type, store and the selected
    owner; the data rides in the page (json_script), so it opens with one request."""
    owner = names.owner_selected(request.session.get("owner"))
    type_, store = request.GET.get("type", "").strip(), request.GET.get("store", "").strip()
    data = graph_data(request.principal, type=type_, store=store, owner=owner)
    context = {
        "graph": data,
        "type": type_,
        "store": store,
        "owner_agent": owner,
        "types": entry_types(owner),
    }
    return render(request, "knowledge/entries/graph.html", context)


@reviewer_required
def entry_citing_view(request, pk):
    entry = access.entry_get_for(request.principal, pk)
    return render(
        request, "knowledge/entries/_citing.html", {"entry": entry, **entry_citing(request.principal, entry)}
    )


def _guide_form(guide, data=None):
    initial = {
        "domain_types": ", ".join(guide.domain_types),
        "taxonomy": guide.taxonomy,
        "page_thresholds": guide.page_thresholds,
        "update_rules": guide.update_rules,
        "version": guide.version,
    }
    return GuideForm(data, initial=initial)


@vary_on_headers("HX-Request")
@reviewer_required
def guide_edit(request, agent_name):
    """The curation guide card (GET), and its edit (POST, admins only)."""
    owner = names.agent_named(agent_name)
    guide = CurationGuide.for_owner(owner)
    form = _guide_form(guide)
    saved = False
    if request.method == "POST":
        access.require_role(request.principal, ADMIN, "Only admins edit curation guides.")
        form = _guide_form(guide, request.POST)
        if form.is_valid():
            data = dict(form.cleaned_data)
            expected = data.pop("version")
            result = _call(
                form,
                guide_update,
                actor=request.principal,
                owner=owner,
                expected_version=expected,
                **data,
            )
            if result is not None:
                saved = True
                guide = CurationGuide.for_owner(owner)
                form = _guide_form(guide)
        if not request.htmx:
            if saved:
                messages.success(request, f"Curation guide of {owner.name} saved (version {guide.version}).")
                return redirect("guide-edit", agent_name=owner.name)
            messages.error(request, "The curation guide was not saved: " + "; ".join(_flat_errors(form)))
            return redirect("guide-edit", agent_name=owner.name)
    elif not request.htmx:
        return _guides_page(request, guide=guide, form=form)
    context = {
        "guide": guide,
        "guide_form": form,
        "owner_agent": owner,
        "guide_saved": saved,
        "guide_open": not saved and request.method == "POST",
    }
    return render(request, "knowledge/entries/list.html#guide", context)


@reviewer_required
def guide_index(request):
    """Every agent's curation guide, to open one without picking an owner first."""
    return _guides_page(request)


def _guides_page(request, *, guide=None, form=None):
    """The curation guides page: the list of every agent's guide (people with a role read them
    all), and the one opened (its card, with the edit form for admins)."""
    agents = list(Agent.objects.order_by("name"))
    saved = {g.owner_id: g for g in CurationGuide.objects.filter(owner__in=agents)}
    rows = [
        {
            "agent": agent,
            "guide": saved.get(agent.pk),
            "types": saved[agent.pk].domain_types
            if agent.pk in saved
            else CurationGuide.DEFAULT_DOMAIN_TYPES,
        }
        for agent in agents
    ]
    context = {
        "rows": rows,
        "guide": guide,
        "guide_form": form,
        "owner_agent": guide.owner if guide else None,
    }
    return render(request, "knowledge/entries/guides.html", context)


def _flat_errors(form) -> list[str]:
    return [str(msg) for msgs in form.errors.values() for msg in msgs]


@reviewer_required
def entry_create(request):
    owner = names.owner_selected(request.session.get("owner"))
    form = EntryCreateForm(initial={"owner": owner.name if owner else None, "scope": "shared"})
    if request.method == "POST":
        form = EntryCreateForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            blocks = []
            if data["first_block"].strip():
                blocks.append({"text": data["first_block"], "sources": data["first_block_sources"]})
            try:
                store = access.parse_scope(data["scope"])
            except Invalid as exc:
                _form_errors(form, exc)
                store = None
            if store:
                entry = _call(
                    form,
                    entries.entry_create,
                    actor=request.principal,
                    owner=data["owner"],
                    store=store,
                    name=data["name"],
                    type=data["type"],
                    aliases=data["aliases"],
                    summary=data["summary"],
                    properties=data["properties"],
                    blocks=blocks,
                )
                if entry is not None:
                    messages.success(request, f"Entry “{entry.name}” created.")
                    return redirect("entry-edit", pk=entry.pk)
    return render(
        request,
        "knowledge/entries/new.html",
        {"form": form, "types": entry_types(owner)},
        status=400 if form.errors else 200,
    )


# --- the entry editor ------------------------------------------------------------------------------


def _editor_context(request, entry, **extra) -> dict:
    blocks = entry_body(entry)
    for i, block in enumerate(blocks):
        block.index = i
    outgoing, incoming = entry_relations(request.principal, entry)
    targets = (
        Entry.objects.filter(access.readable_q(request.principal), owner=entry.owner)
        .exclude(pk=entry.pk)
        .order_by("-updated_at")
        .values("pk", "name")[:200]
    )
    context = {
        "entry": entry,
        "blocks": blocks,
        "blocks_total": len(blocks),
        "outgoing": outgoing,
        "incoming": incoming,
        "types": entry_types(entry.owner),
        "targets": targets,
        "tab": "edit",
        "meta_form": EntryMetaForm(
            initial={
                "name": entry.name,
                "type": entry.type,
                "aliases": ", ".join(entry.aliases),
                "summary": entry.summary,
                "properties": entry.properties,
                "version": entry.version,
            }
        ),
        "block_form": BlockForm(),
        "relation_form": RelationForm(),
    }
    correcting = extra.pop("correcting", None) or _int(request.GET.get("correct"))
    if correcting and "correct_form" not in extra:
        block = next((b for b in blocks if b.pk == correcting), None)
        if block is not None:
            extra["correct_form"] = _correct_form(block)
    context["correcting"] = correcting
    history = _int(request.GET.get("history"))
    if history:
        context["history_block"] = history
        context["history"] = MemoryVersion.objects.filter(memory_id=history, memory__entry=entry)
    context.update(extra)
    return context


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _correct_form(block, data=None):
    return BlockCorrectForm(
        data,
        initial={
            "text": block.text,
            "sources": [{"kind": s.kind, "ref": s.ref} for s in block.sources.all()],
            "version": block.version,
        },
    )


def _live_entry(request, pk) -> Entry:
    return access.entry_get_for(request.principal, pk)


@reviewer_required
def entry_edit(request, pk):
    entry = access.entry_get_for(request.principal, pk, include_deleted=True)
    context = _editor_context(request, entry)
    if entry.is_deleted:
        context["delete_event"] = (
            AuditEvent.objects.filter(action="entry.deleted", data__entry=entry.pk)
            .order_by("-created_at")
            .first()
        )
    return render(request, EDIT, context)


def _fragment(request, entry, name, status=200, **extra):
    """The editor section `name` for htmx, else the whole editor page."""
    context = _editor_context(request, entry, **extra)
    template = EDIT + f"#{name}" if request.htmx else EDIT
    return render(request, template, context, status=status if not request.htmx else 200)


@reviewer_required
@require_POST
def entry_meta(request, pk):
    entry = _live_entry(request, pk)
    form = EntryMetaForm(request.POST)
    if form.is_valid():
        data = dict(form.cleaned_data)
        expected = data.pop("version")
        updated = _call(
            form,
            entries.entry_update,
            actor=request.principal,
            entry_id=entry.pk,
            expected_version=expected,
            **data,
        )
        if updated is not None:
            if not request.htmx:
                messages.success(request, "Entry saved.")
                return redirect("entry-edit", pk=entry.pk)
            return _fragment(request, Entry.objects.get(pk=entry.pk), "meta", meta_saved=True)
    return _fragment(request, entry, "meta", status=400, meta_form=form)


@reviewer_required
@require_POST
def entry_delete(request, pk):
    entry = _live_entry(request, pk)
    deleted = entries.entry_delete(
        actor=request.principal, entry_id=entry.pk, reason=request.POST.get("reason", "")
    )
    messages.success(
        request,
        f"Entry “{deleted.name}” deleted. An admin can restore it from its delete record "
        f"(audit event {deleted.audit_event.pk}).",
    )
    response = redirect("entry-list")
    if request.htmx:
        response["HX-Redirect"] = reverse("entry-list")
    return response


@reviewer_required
@require_POST
def block_add(request, pk):
    entry = _live_entry(request, pk)
    form = BlockForm(request.POST)
    if form.is_valid():
        block = _call(
            form,
            entries.block_add,
            actor=request.principal,
            entry_id=entry.pk,
            text=form.cleaned_data["text"],
            sources=form.cleaned_data["sources"],
        )
        if block is not None:
            if not request.htmx:
                messages.success(request, "Block added.")
                return redirect(reverse("entry-edit", args=[entry.pk]) + f"#block-{block.pk}")
            return _fragment(request, entry, "blocks")
    return _fragment(request, entry, "blocks", status=400, block_form=form)


def _body_block(entry, block_id) -> Memory:
    blocks = entry_body(entry)
    for i, block in enumerate(blocks):
        block.index = i
        if block.pk == block_id:
            block.total = len(blocks)
            return block
    raise Http404("No such block in this entry.")


def _block_fragment(request, entry, block_id, name, **extra):
    block = _body_block(entry, block_id)
    context = {"entry": entry, "block": block, "blocks_total": block.total, **extra}
    return render(request, EDIT + f"#{name}", context)


@vary_on_headers("HX-Request")
@reviewer_required
def block_view(request, pk, block_id):
    entry = _live_entry(request, pk)
    if not request.htmx:
        return redirect(reverse("entry-edit", args=[entry.pk]) + f"#block-{block_id}")
    return _block_fragment(request, entry, block_id, "block")


@vary_on_headers("HX-Request")
@reviewer_required
def block_correct(request, pk, block_id):
    """GET: the inline correction form. POST: correct the block (a reason is required)."""
    entry = _live_entry(request, pk)
    block = _body_block(entry, block_id)
    if request.method != "POST":
        if not request.htmx:
            return redirect(reverse("entry-edit", args=[entry.pk]) + f"?correct={block.pk}#block-{block.pk}")
        return _block_fragment(request, entry, block_id, "block_form", correct_form=_correct_form(block))
    form = _correct_form(block, request.POST)
    if form.is_valid():
        data = form.cleaned_data
        corrected = _call(
            form,
            entries.block_correct,
            actor=request.principal,
            entry_id=entry.pk,
            block_id=block.pk,
            text=data["text"],
            reason=data["reason"],
            sources=data["sources"],
            expected_version=data["version"],
        )
        if corrected is not None:
            if not request.htmx:
                messages.success(request, f"Block corrected (version {corrected.version}).")
                return redirect(reverse("entry-edit", args=[entry.pk]) + f"#block-{block.pk}")
            return _block_fragment(request, entry, block_id, "block", just_corrected=True)
    if request.htmx:
        return _block_fragment(request, entry, block_id, "block_form", correct_form=form)
    context = _editor_context(request, entry, correcting=block.pk, correct_form=form)
    return render(request, EDIT, context, status=400)


@reviewer_required
@require_POST
def block_move(request, pk, block_id):
    entry = _live_entry(request, pk)
    position = _int(request.POST.get("position"))
    if position is None:
        messages.error(request, "Give the new position.")
    else:
        entries.block_move(actor=request.principal, entry_id=entry.pk, block_id=block_id, position=position)
    if not request.htmx:
        return redirect(reverse("entry-edit", args=[entry.pk]) + f"#block-{block_id}")
    return _fragment(request, entry, "blocks")


@reviewer_required
@require_POST
def block_remove(request, pk, block_id):
    entry = _live_entry(request, pk)
    entries.block_remove(
        actor=request.principal,
        entry_id=entry.pk,
        block_id=block_id,
        reason=request.POST.get("reason", ""),
    )
    if not request.htmx:
        messages.success(request, "Block removed; its history is kept and the removal can be restored.")
        return redirect("entry-edit", pk=entry.pk)
    return _fragment(request, entry, "blocks")


@vary_on_headers("HX-Request")
@reviewer_required
def block_history(request, pk, block_id):
    entry = access.entry_get_for(request.principal, pk, include_deleted=True)
    block = get_object_or_404(Memory, pk=block_id, entry=entry)
    if not request.htmx:
        return redirect(reverse("entry-edit", args=[entry.pk]) + f"?history={block.pk}#block-{block.pk}")
    context = {"entry": entry, "history_block": block.pk, "history": block.versions.all()}
    return render(request, EDIT + "#block_history", context)


@reviewer_required
@require_POST
def relation_add(request, pk):
    entry = _live_entry(request, pk)
    form = RelationForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        relation = _call(
            form,
            entries.relation_add,
            actor=request.principal,
            entry_id=entry.pk,
            predicate=data["predicate"],
            target_id=data["target"],
            sources=data["sources"],
            valid_from=data["valid_from"],
            valid_to=data["valid_to"],
        )
        if relation is not None:
            if not request.htmx:
                messages.success(request, "Relation added.")
                return redirect(reverse("entry-edit", args=[entry.pk]) + "#relations")
            return _fragment(request, entry, "relations")
    return _fragment(request, entry, "relations", status=400, relation_form=form)


@reviewer_required
@require_POST
def relation_remove(request, pk, relation_id):
    entry = _live_entry(request, pk)
    entries.relation_remove(  # an unknown relation: NotFound, the console's 404
        actor=request.principal,
        entry_id=entry.pk,
        relation_id=relation_id,
        reason=request.POST.get("reason", ""),
    )
    if not request.htmx:
        messages.success(request, "Relation removed.")
        return redirect(reverse("entry-edit", args=[entry.pk]) + "#relations")
    return _fragment(request, entry, "relations")


@reviewer_required
def entry_projection(request, pk):
    entry = access.entry_get_for(request.principal, pk, include_deleted=True)
    blocks = entry_body(entry)
    outgoing, incoming = entry_relations(request.principal, entry)
    text = entry_markdown(entry, blocks, outgoing, incoming)
    sources = sorted(
        {(s.kind, s.ref) for b in blocks if b.status == Memory.ACTIVE for s in b.sources.all()}
        | {(s["kind"], s["ref"]) for r in outgoing for s in r.sources}
    )
    context = {
        "entry": entry,
        "tab": "projection",
        "markdown": text,
        "html": render_markdown(text),
        "queued": sum(1 for b in blocks if b.status == Memory.QUEUED),
        "sources": [{"kind": k, "ref": r, "url": source_url(k, r)} for k, r in sources],
    }
    return render(request, "knowledge/entries/projection.html", context)


@reviewer_required
def entry_audit(request, pk):
    entry = access.entry_get_for(request.principal, pk, include_deleted=True)
    events = list(entry_history(entry)[:200])
    return render(
        request,
        "knowledge/entries/audit.html",
        {"entry": entry, "tab": "audit-entry", "events": events, "selectable": request.principal.is_admin},
    )
