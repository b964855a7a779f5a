"""Console: the Knowledge page's Audit tab — filter the trail, preview an event's before/after,
and restore one event or a selected batch atomically (admins)."""

import math

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.vary import vary_on_headers

from knowledge.audit.selectors import AuditFilters, audit_actions, audit_events, changed_fields
from knowledge.errors import Invalid, NotFound
from knowledge.limits import console_page
from knowledge.principals.permissions import admin_required, reviewer_required
from knowledge.restore import services as restore
from knowledge.restore.filters import audit_filters_from
from knowledge.restore.restorers import RESTORERS
from knowledge.restore.services import RestoreConflict
from knowledge.stores import store_person

PAGE_SIZE = 50


def _object_link(object_type: str, object_id: str, value: dict | None) -> str | None:
    from django.urls import reverse

    if object_type == "entry":
        return reverse("entry-edit", args=[int(object_id)])
    if object_type == "memory" and value and value.get("entry_id"):
        return reverse("entry-edit", args=[value["entry_id"]]) + f"#block-{object_id}"
    if object_type == "relation" and value and value.get("source_id"):
        return reverse("entry-edit", args=[value["source_id"]]) + "#relations"
    return None


@vary_on_headers("HX-Request")
@reviewer_required
def audit_list(request):
    params = request.GET.copy()
    owner = request.session.get("owner", "")
    params["owner"] = owner
    error = ""
    try:
        filters = audit_filters_from(params)
        page = console_page(request.GET.get("page"))
    except (Invalid, ValueError) as exc:
        error = "; ".join(f"{k}: {v[0]}" for k, v in getattr(exc, "detail", {"page": ["Invalid."]}).items())
        filters, page = AuditFilters(owner=owner), 1
    qs = audit_events(filters)
    count = qs.count()
    # what "restore the whole batch" restores: every restorable event of it, whatever else is filtered
    batch = AuditFilters(batch=filters.batch, restorable=True)
    restorable = audit_events(batch).count() if filters.batch else 0
    events = list(qs[(page - 1) * PAGE_SIZE : page * PAGE_SIZE])
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "tab": "audit",
        "events": events,
        "count": count,
        "page": page,
        "pages": max(1, math.ceil(count / PAGE_SIZE)),
        "filters": filters,
        "actions": audit_actions(),
        "query": query.urlencode(),
        "error": error,
        "selectable": request.principal.is_admin,
        "batch_restorable": restorable,
        "owner": owner,
    }
    template = "knowledge/audit/list.html"
    if request.htmx and request.htmx.target == "events":
        template += "#events"
    return render(request, template, context)


@vary_on_headers("HX-Request")
@reviewer_required
def audit_detail(request, pk):
    event = get_object_or_404(audit_events(AuditFilters()), pk=pk)
    revisions = []
    for rev in event.revisions.all():
        restorer = RESTORERS.get(rev.object_type)
        value = rev.after or rev.before
        revisions.append(
            {
                "object_type": rev.object_type,
                "object_id": rev.object_id,
                "label": restorer.label(rev.object_id, value)
                if restorer
                else f"{rev.object_type} {rev.object_id}",
                "link": _object_link(rev.object_type, rev.object_id, value),
                "kind": "created" if rev.before is None else "deleted" if rev.after is None else "changed",
                "fields": changed_fields(rev.before, rev.after),
            }
        )
    restored_by = None
    if event.action == "audit.restored":
        restored_by = event.data.get("events", [])
    context = {"tab": "audit", "event": event, "revisions": revisions, "restored_events": restored_by}
    if request.htmx:
        return render(request, "knowledge/audit/detail.html#preview", context)
    return render(request, "knowledge/audit/detail.html", context)


@admin_required
def audit_restore(request):
    """GET: preview restoring the selected events, or every restorable event of one `batch`
    (nothing is written). POST: restore them, all or nothing; a conflict writes nothing and
    names the conflicting records."""
    source = request.POST if request.method == "POST" else request.GET
    event_ids = source.getlist("events")
    preview = request.method != "POST"
    context = {"tab": "audit", "event_ids": event_ids}
    try:
        if not event_ids and source.get("batch"):
            batch = audit_filters_from({"batch": source["batch"]}).batch
            event_ids = list(
                audit_events(AuditFilters(batch=batch, restorable=True)).values_list("pk", flat=True)
            )
            context.update(event_ids=event_ids, batch=batch)
        plan = restore.audit_restore(actor=request.principal, event_ids=event_ids, preview=preview)
    except RestoreConflict as conflict:
        context.update(steps=_steps(conflict.plan.steps), conflicts=conflict.conflicts)
        return render(request, "knowledge/audit/restore.html", context, status=409)
    except (Invalid, NotFound) as exc:
        detail = exc.detail
        messages_ = (
            [str(m) for msgs in detail.values() for m in msgs] if isinstance(detail, dict) else [str(detail)]
        )
        context["errors"] = messages_
        return render(request, "knowledge/audit/restore.html", context, status=exc.status_code)
    if preview:
        context["steps"] = _steps(plan.steps)
        context["outcomes"] = _outcomes(plan.outcomes)
        context["erased"] = plan.erased
        return render(request, "knowledge/audit/restore.html", context)
    records = plan.event.counts.get("records", 0)
    messages.success(
        request,
        f"Restored {records} record{'s' if records != 1 else ''} from {len(plan.event.object_ids)} "
        f"event{'s' if len(plan.event.object_ids) != 1 else ''}. This restore is audit event {plan.event.pk} "
        "and can itself be restored.",
    )
    return redirect("audit-detail", pk=plan.event.pk)


def _outcomes(outcomes) -> list[dict]:
    """What the restore writes, one row per object, with the fields it writes as people read
    them — the same list the restore itself carries out (knowledge.restore.services)."""
    rows = []
    for outcome in outcomes:
        content = RESTORERS[outcome.object_type].content
        if outcome.target is None:
            after = dict(content(outcome.current) or {})
            if outcome.object_type == "memory":
                after["status"] = "invalidated"
            fields = [r for r in changed_fields(content(outcome.current), after) if r["field"] != "sources"]
            if not fields:
                fields = [
                    {"field": "", "label": "the whole record", "before": "present", "after": outcome.kind}
                ]
        else:
            fields = [
                r
                for r in changed_fields(content(outcome.current), content(outcome.target))
                if outcome.current is None or r["field"] in outcome.fields
            ]
        rows.append(
            {
                **_what(outcome.current or outcome.target),
                "label": outcome.label,
                "kind": outcome.kind,
                "link": _object_link(
                    outcome.object_type, outcome.object_id, outcome.target or outcome.current
                ),
                "fields": fields,
            }
        )
    return rows


def _what(value: dict | None) -> dict:
    """What a person judges a restored row by: its text (an entry's name), its store, and the
    person it is about (a private store's) or by (a person's own write)."""
    value = value or {}
    store = value.get("store", "")
    person = store_person(store) or (
        value.get("author_name", "") if value.get("author_kind") == "person" else ""
    )
    return {"text": value.get("text") or value.get("name") or "", "store": store, "person": person}


def _steps(steps) -> list[dict]:
    """Each record of a restore: what it changes now (content fields), and for a conflict, how
    the current value differs from the one its event left behind."""
    rows = []
    for step in steps:
        content = RESTORERS[step.object_type].content
        conflict_rows = []
        if step.conflict:
            conflict_rows = [
                row
                for row in changed_fields(content(step.left_behind), content(step.current))
                if row["field"] in step.conflict_fields
            ]
        rows.append(
            {
                "event": step.event,
                "label": step.label,
                "link": _object_link(step.object_type, step.object_id, step.left_behind or step.restore_to),
                "conflict_fields": step.conflict_fields,
                "conflict_rows": conflict_rows,
                "fields": changed_fields(content(step.current), content(step.restore_to)),
                "kind": "remove"
                if step.restore_to is None
                else "recreate"
                if step.current is None
                else "change",
            }
        )
    return rows
