"""Console views of the review queue (the reviewers' main screen). Each view returns the full
page, or for an htmx request the fragment it changed; every action also works as a plain form
post (post, redirect, message). The memories pages are memory.lifecycle.pages."""

import math
from urllib.parse import urlencode, urlsplit

from django.contrib import messages
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import retarget

from knowledge import access
from knowledge.errors import Conflict, Invalid
from knowledge.models import Memory
from knowledge.principal import REVIEWER
from knowledge.principals.permissions import console_principal, reviewer_required
from knowledge.principals.views import safe_next
from knowledge.web import error_text
from memory.lifecycle import hints, queue, review, selectors
from memory.lifecycle.forms import (
    ApproveForm,
    BulkReviewForm,
    EditApproveForm,
    QueueFilterForm,
    RejectForm,
    first_error,
)
from memory.lifecycle.shown import shown_flags, shown_snapshot

BULK_MOST = 1000  # one decision on a filter's matches decides at most this many
FLAGS_SHOWN = 20  # a confirmation lists this many of the duplicates and contradictions it names


def _owner(request) -> str:
    return request.session.get("owner", "")


def _next(request, default: str) -> str:
    return safe_next(request, request.POST.get("next"), default)


# --- the review queue ---------------------------------------------------------------------


def _filter_data(request) -> QueryDict:
    """The queue's URL parameters behind a request: its own query string, or for a decision
    posted from the queue (no query of its own) the page it was made on — htmx says which in
    HX-Current-URL, a plain form in `next` — so what is re-rendered keeps the reviewer's filter."""
    if request.method == "GET" or request.GET:
        return request.GET
    url = (request.htmx.current_url if request.htmx else "") or request.POST.get("next", "")
    return QueryDict(urlsplit(url or "").query)


def _query(where: queue.QueueFilter, order: str, size: int, **extra) -> str:
    """The queue's query string for a filter, an order, a page size (defaults left out)."""
    params = dict(where.params())
    if order != queue.OLDEST:
        params["order"] = order
    if size != queue.PAGE_SIZE:
        params["size"] = size
    params.update({k: v for k, v in extra.items() if v not in ("", None)})
    return urlencode(params, safe=":")


def _queue_context(
    request,
    *,
    notice: str = "",
    notice_kind: str = "success",
    selected: frozenset = frozenset(),
    batch: str = "",
) -> dict:
    """The queue page's context; `batch` is the audit batch of the bulk decision just made."""
    owner = _owner(request)
    form = QueueFilterForm(_filter_data(request))
    where, order, size, number = form.parsed()
    total = queue.queued_matching(where, owner=owner).count()
    pages = max(1, math.ceil(total / size))
    offset = (min(number, pages) - 1) * size
    if form.after_id:
        # "next" names the last memory shown rather than a page number (see queue_offset_after).
        found = queue.queue_offset_after(where, owner=owner, order=order, after=form.after_id)
        if found is not None:
            offset = found if found < total else (pages - 1) * size
    # A page that starts past the first memory has a previous page, even when decisions made on
    # the one before moved it up by less than a page ("page 2" may start at the 7th memory).
    number = -(-offset // size) + 1
    items = queue.queue_page(
        where, owner=owner, order=order, offset=offset, size=size, principal=request.principal
    )
    last = items[-1].memory.pk if items else None
    facets = queue.queue_facets(where, owner=owner)
    query = _query(where, order, size)
    return {
        "items": items,
        "conflicts": selectors.conflicts_in_force(request.principal, owner=owner),
        "where": where,
        "order": order,
        "orders": queue.ORDERS,
        "size": size,
        "sizes": queue.PAGE_SIZES,
        "total": total,
        "page_number": number,
        "pages": pages,
        "query": query,
        "page_query": _query(where, order, size, page=number if number > 1 else None),
        "prev_query": _query(where, order, size, page=number - 1 if number > 2 else None)
        if number > 1
        else "",
        "next_query": _query(where, order, size, after=last) if offset + size < total and last else "",
        **_tabs_context(request, where, order, size, counts=facets["reason"]),
        "facets": facets,
        "imports": {name: label for name, (label, _c, _p) in queue.IMPORTS.items()},
        "ages": {name: label for name, (label, _l, _u) in queue.AGES.items()},
        "decisions": selectors.recent_review_decisions(owner=owner),
        "notice": notice,
        "notice_kind": notice_kind,
        "notice_batch": batch,
        "selected": selected,
    }


@never_cache  # back from a memory's source shows the queue as it is now, not the page first loaded
@vary_on_headers("HX-Request")
@reviewer_required
@require_GET
def review_queue(request):
    template = "memory/lifecycle/queue.html"
    if request.htmx:
        template += "#queue"
    return render(request, template, _queue_context(request))


@require_GET
def review_count(request):
    """The navigation badge, polled by htmx. A logged-out or role-less user gets 204 (htmx swaps
    nothing) rather than a login page squeezed into the badge."""
    if not request.user.is_authenticated or not access.has_role(console_principal(request), REVIEWER):
        return HttpResponse(status=204)
    return render(request, "memory/lifecycle/_queue_count.html")


def _item_response(request, memory_id: int, *, done: str = "", error: str = ""):
    """After a single review action: for htmx, the card's replacement (a one-line result, or the
    card again with the error when the memory is still queued) plus the badge, the reason tabs
    and the decisions panel swapped out of band; otherwise a message and a redirect."""
    if not request.htmx:
        if done:
            messages.success(request, done)
        else:
            messages.error(request, error)
        return redirect(_next(request, reverse("review-queue")))
    items = selectors.review_queue(ids=[memory_id], principal=request.principal) if error else []
    context = {
        "memory_id": memory_id,
        "done": done,
        "error": error,
        "item": items[0] if items else None,
        "oob": True,
        **_tabs_context(request),
        "decisions": selectors.recent_review_decisions(owner=_owner(request)),
    }
    return render(request, "memory/lifecycle/queue.html#item-result", context)


def _tabs_context(request, where=None, order=queue.OLDEST, size=queue.PAGE_SIZE, counts=None) -> dict:
    """The reason tabs: each reason's count and link under the rest of the reviewer's filter."""
    if where is None:
        where, order, size, _page = QueueFilterForm(_filter_data(request)).parsed()
    if counts is None:
        counts = queue.queue_reason_counts(where, owner=_owner(request))
    return {
        "reason": where.reason,
        "reason_counts": counts,
        "reason_labels": selectors.QUEUE_REASON_LABELS,
        "reason_queries": {r: _query(where.without("reason"), order, size, reason=r) for r in counts},
        "all_query": _query(where.without("reason"), order, size),
    }


def _approved(memory: Memory, edited: bool = False) -> str:
    if memory.status == Memory.ACTIVE:
        done = f"Memory {memory.pk} {'edited (new version) and ' if edited else ''}approved."
        touched = selectors.retired_by(memory)
        if touched:
            done += " " + touched
        return done
    # The eval gate may hold an approved memory in the queue (enforce mode).
    return f"Memory {memory.pk} stays queued: {memory.status_reason or 'held by the eval gate'}."


def _review(request, memory_id: int, service, done, **kwargs):
    """Run one review service; `done` is the success message, or a function of the memory."""
    try:
        memory = service(actor=request.principal, memory_id=memory_id, **kwargs)
    except (Conflict, Invalid) as exc:
        return _item_response(request, memory_id, error=error_text(exc))
    return _item_response(request, memory_id, done=done(memory) if callable(done) else done)


@reviewer_required
@require_POST
def review_approve(request, memory_id: int):
    form = ApproveForm(request.POST)
    if not form.is_valid():
        return _item_response(request, memory_id, error=first_error(form))
    data = form.cleaned_data
    supersedes = Memory.objects.filter(pk=data["supersedes"]).first() if data["supersedes"] else None
    return _review(
        request,
        memory_id,
        review.memory_approve,
        _approved,
        supersedes=supersedes,
        decision=data["decision"] or None,
        boundary=data["boundary"],
        shown=data["shown"],
    )


@reviewer_required
@require_POST
def review_conflict_keep(request, memory_id: int):
    """Settle a conflict in force in favour of active memory `memory_id` (replace the others, or
    keep them as of different times). Plain form post; htmx refreshes the whole queue."""
    form = ApproveForm(request.POST)
    notice, kind = "", "success"
    if not form.is_valid() or not form.cleaned_data["decision"]:
        notice, kind = (first_error(form) if form.errors else "Choose replace or keep both."), "error"
    else:
        access.memory_get_for(request.principal, memory_id)
        try:
            memory = review.memory_conflict_resolve(
                actor=request.principal,
                memory_id=memory_id,
                decision=form.cleaned_data["decision"],
                boundary=form.cleaned_data["boundary"],
            )
            notice = f"Kept memory {memory.pk}. {selectors.retired_by(memory)}"
        except (Conflict, Invalid) as exc:
            notice, kind = error_text(exc), "error"
    if not request.htmx:
        getattr(messages, kind)(request, notice)
        return redirect(_next(request, reverse("review-queue")))
    context = _queue_context(request, notice=notice, notice_kind=kind)
    context["oob"] = True
    return render(request, "memory/lifecycle/queue.html#queue-swap", context)


@reviewer_required
@require_POST
def review_duplicate(request, memory_id: int):
    """One click: reject a queued memory as a duplicate of memory `of` (reason filled in, audited)."""
    of = request.POST.get("of", "")
    if not of.isdigit():
        return _item_response(request, memory_id, error="Name the memory it duplicates.")
    return _review(
        request,
        memory_id,
        review.memory_reject_duplicate,
        f"Memory {memory_id} rejected as a duplicate of #{of}.",
        of=int(of),
        hint=request.POST.get("hint", ""),
    )


@reviewer_required
@require_POST
def review_unrelated(request, memory_id: int):
    """Dismiss one hint of a card as unrelated (the pair is not flagged again); the card comes
    back without it."""
    other, hint = request.POST.get("other", ""), request.POST.get("hint", "")
    if not other.isdigit():
        return _item_response(request, memory_id, error="Name the memory the hint pairs it with.")
    for pk in (memory_id, int(other)):
        access.memory_get_for(request.principal, pk)
    try:
        hints.hint_dismiss(actor=request.principal, memory_id=memory_id, other_id=int(other), hint=hint)
    except Invalid as exc:
        return _item_response(request, memory_id, error=error_text(exc))
    notice = (
        f"The {hint} hint between #{memory_id} and #{other} is dismissed as unrelated: not flagged again."
    )
    if not request.htmx:
        messages.success(request, notice)
        return redirect(_next(request, reverse("review-queue")))
    items = selectors.review_queue(ids=[memory_id], principal=request.principal)
    if not items:  # decided meanwhile
        return _item_response(request, memory_id, done=notice)
    context = {"item": items[0], "card_notice": notice, "reason_labels": selectors.QUEUE_REASON_LABELS}
    return render(request, "memory/lifecycle/queue.html#item", context)


@reviewer_required
@require_POST
def review_reject(request, memory_id: int):
    form = RejectForm(request.POST)
    if not form.is_valid():
        return _item_response(request, memory_id, error=first_error(form))
    return _review(
        request,
        memory_id,
        review.memory_reject,
        f"Memory {memory_id} rejected.",
        reason=form.cleaned_data["reason"],
    )


@reviewer_required
@require_POST
def review_edit(request, memory_id: int):
    form = EditApproveForm(request.POST)
    if not form.is_valid():
        return _item_response(request, memory_id, error=first_error(form))
    return _review(
        request,
        memory_id,
        review.memory_edit_and_approve,
        lambda memory: _approved(memory, edited=True),
        text=form.cleaned_data["text"],
        reason=form.cleaned_data["reason"],
    )


@reviewer_required
@require_POST
def review_bulk(request):
    form = BulkReviewForm(request.POST)
    notice, kind, done = "", "success", False
    if not form.is_valid():
        notice, kind = first_error(form), "error"
    else:
        data = form.cleaned_data
        result = review.memory_review_bulk(
            actor=request.principal, memory_ids=data["ids"], action=data["action"], reason=data["reason"]
        )
        verb = "Approved" if data["action"] == "approve" else "Rejected"
        notice, kind = _bulk_notice(result, verb)
        done = bool(result["done"])
    if not request.htmx:
        getattr(messages, {"success": "success", "warning": "warning", "error": "error"}[kind])(
            request, notice
        )
        return redirect(_next(request, reverse("review-queue")))
    # What is still queued stays ticked, so a reviewer corrects the reason and submits again
    # instead of picking the memories anew.
    selected = frozenset(int(i) for i in request.POST.getlist("ids") if i.isdigit())
    context = _queue_context(
        request, notice=notice, notice_kind=kind, selected=selected, batch=result["batch"] if done else ""
    )
    context["oob"] = True
    return render(request, "memory/lifecycle/queue.html#queue-swap", context)


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{i}" for i in ids[:20]) + ("…" if len(ids) > 20 else "")


def _bulk_notice(result: dict, verb: str, *, matched: str = "") -> tuple[str, str]:
    done, failed = result["done"], result["failed"]
    parts = []
    if done:
        ids = ", ".join(map(str, done[:20])) + (f", … {len(done) - 20} more" if len(done) > 20 else "")
        parts.append(f"{verb} {len(done)} memor{'y' if len(done) == 1 else 'ies'}{matched} ({ids}).")
    left = result.get("left", [])
    if left:
        parts.append(f"Left queued as you asked, with a duplicate or contradiction: {_ids(left)}.")
    changed = result.get("changed", [])
    if changed:
        parts.append(
            f"Left queued, changed since you were shown {'it' if len(changed) == 1 else 'them'}: "
            + _ids(changed)
            + "."
        )
        failed = {i: m for i, m in failed.items() if i not in changed}
    held = result.get("held", [])
    if held:
        parts.append(f"{len(held)} of them wait{'s' if len(held) == 1 else ''} for the eval gate's check.")
    if failed:
        shown = list(failed.values())[:5]
        more = len(failed) - len(shown)
        parts.append(" ".join(shown) + (f" And {more} more not decided." if more > 0 else ""))
    kind = "success" if not (failed or changed) else ("warning" if done else "error")
    return " ".join(parts) or "Nothing was changed.", kind


def _terms(where: queue.QueueFilter) -> list[tuple[str, str]]:
    """The filter in words, for the confirmation: [("agent", "copilot"), ("import", "Mem0 import")]."""
    labels = {
        "reason": selectors.QUEUE_REASON_LABELS.get(where.reason, where.reason),
        "imported": queue.IMPORTS[where.imported][0] if where.imported in queue.IMPORTS else "",
        "age": queue.AGES[where.age][0] if where.age in queue.AGES else "",
    }
    names = {"imported": "origin", "source": "a source of kind", "age": "waiting", "q": "text"}
    return [
        (names.get(name, name), labels.get(name) or value) for name, value in vars(where).items() if value
    ]


@vary_on_headers("HX-Request")
@reviewer_required
@require_http_methods(["GET", "POST"])
def review_bulk_filter(request):
    """Approve or reject everything the queue's current filter matches: a GET shows the count and
    asks for confirmation, carrying a snapshot token that names exactly the memories counted
    (memory.lifecycle.shown); the confirming POST decides those memories and no others through
    memory_review_bulk (set-wise, with a lone decision's checks and audit event per memory, one
    audit batch an admin can restore). One that changed since or left the queue is left as it
    is and named; one that came to match the filter since is not decided, and counted."""
    data = request.POST if request.method == "POST" else request.GET
    where, order, size, _page = QueueFilterForm(request.GET).parsed()  # the filter is in the URL
    action = data.get("action") if data.get("action") in ("approve", "reject") else "approve"
    context = {
        "where": where,
        "order": order,
        "size": size,
        "query": _query(where, order, size),
        "action": action,
        "terms": _terms(where),
        "reject_reason": data.get("reason", ""),
    }
    if request.method == "POST":
        reason = (data.get("reason") or "").strip()
        try:
            if action == "reject" and not reason:
                raise Invalid({"reason": ["Say why the memories are rejected."]})
            result = review.memory_review_shown(
                actor=request.principal,
                snapshot=data.get("snapshot", ""),
                action=action,
                reason=reason,
                flagged=data.get("flagged", ""),
            )
        except Invalid as exc:
            context["error"] = error_text(exc)
        else:
            verb = "Approved" if action == "approve" else "Rejected"
            notice, kind = _bulk_notice(result, verb, matched=" matching the filter")
            arrived = (
                queue.queued_matching(where, owner=_owner(request)).exclude(pk__in=result["shown"]).count()
            )
            if arrived:
                notice += (
                    f" {arrived} memor{'y' if arrived == 1 else 'ies'} that came to match the filter after "
                    "you confirmed w" + ("as" if arrived == 1 else "ere") + " not decided."
                )
            if not request.htmx:
                getattr(messages, kind)(request, notice)
                return redirect(
                    reverse("review-queue") + (f"?{context['query']}" if context["query"] else "")
                )
            swap = _queue_context(
                request, notice=notice, notice_kind=kind, batch=result["batch"] if result["done"] else ""
            )
            swap["oob"] = True
            return render(request, "memory/lifecycle/queue.html#queue-swap", swap)
    shown = queue.queue_matching_shown(where, owner=_owner(request), order=order, most=BULK_MOST)
    # an approval names the duplicates and contradictions it would put in force, and asks
    flags = shown_flags([pk for pk, _ in shown], request.principal) if action == "approve" else []
    flagged = sorted({pk for flag in flags for pk in flag.leaves})
    context.update(
        count=len(shown),
        capped=len(shown) == BULK_MOST,
        snapshot=shown_snapshot(shown, flagged),
        flags=flags[:FLAGS_SHOWN],
        flag_count=len(flags),
        flagged_count=len(flagged),
        unflagged_count=len(shown) - len(flagged),
    )
    template = "memory/lifecycle/queue_confirm.html"
    if not request.htmx:
        return render(request, template, context)
    # The confirming form targets the queue; asked again, it stays where it was.
    return retarget(render(request, template + "#confirm", context), "#bulk-confirm")
