"""Console: the recall playground (why did an agent remember that?), memory_browse pages and the
pinned-memo editor. They call the same scope, search, browse and memo code as the API."""

from datetime import UTC, datetime

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.vary import vary_on_headers

from knowledge import access, names
from knowledge.errors import DomainError, Invalid, Refused
from knowledge.models import Agent, Channel, Conversation
from knowledge.principal import ADMIN
from knowledge.principals.permissions import reviewer_required
from knowledge.tokens import count_tokens
from memory.recall import ROUTES, memory_search, resolve_scope
from memory.recall.browse import KINDS, Browser
from memory.recall.memo import MemoChanged, memo_budget_tokens, memo_for, memo_out, memo_update
from memory.recall.params import HOP_ROUTES
from memory.recall.present import outcome_out
from memory.recall.search import MAX_BUDGET, MAX_K


def _int(value, default, lo, hi):
    try:
        return max(lo, min(hi, int(value)))
    except (TypeError, ValueError):
        return default


def _errors(exc: DomainError) -> str:
    detail = exc.detail
    if isinstance(detail, dict):
        return "; ".join(
            f"{k}: {' '.join(map(str, v if isinstance(v, list) else [v]))}" for k, v in detail.items()
        )
    return str(detail)


@vary_on_headers("HX-Request")
@reviewer_required
def playground(request):
    """Pick an agent and a conversation or channel, type a query: see every result with its rank
    and score in each route, the fused score, the decay and the token budget use."""
    params = request.GET
    form = {
        "agent": params.get("agent", ""),
        "conversation": params.get("conversation", ""),
        "channel": params.get("channel", ""),
        "q": params.get("q", ""),
        "k": _int(params.get("k"), 10, 1, MAX_K),
        "budget_tokens": _int(params.get("budget_tokens"), 2000, 1, MAX_BUDGET),
        "now": params.get("now", ""),
    }
    if not form["agent"] and request.session.get("owner"):
        form["agent"] = request.session["owner"]
    context = {
        "form": form,
        "agents": Agent.objects.order_by("name"),
        "conversations": Conversation.objects.select_related("agent", "channel").order_by("-started_at")[
            :200
        ],
        "channels": Channel.objects.order_by("name"),
        "routes": ROUTES + HOP_ROUTES,  # a column per ranking, the second hop's too
    }
    if form["q"] and form["agent"]:
        try:
            # A conversation names its channel; the channel field counts only without one.
            named = names.scope_for(
                request.principal,
                agent=form["agent"],
                channel=None if form["conversation"] else form["channel"] or None,
            )
            agent, channel, conversation = named.agent, named.channel, None
            if form["conversation"]:
                conversation = Conversation.objects.filter(pk=_int(form["conversation"], 0, 0, 2**62)).first()
                if conversation is None:
                    raise Invalid({"conversation": ["Unknown conversation."]})
            now = None
            if form["now"]:
                try:
                    now = datetime.fromisoformat(form["now"])
                except ValueError:
                    raise Invalid({"now": ["Use an ISO time, e.g. 2026-03-01T12:00."]}) from None
                if timezone.is_naive(now):
                    now = timezone.make_aware(now, UTC)
            scope = resolve_scope(request.principal, agent=agent, conversation=conversation, channel=channel)
            outcome = memory_search(
                scope, q=form["q"], k=form["k"], budget_tokens=form["budget_tokens"], now=now
            )
            context["outcome"] = outcome_out(outcome)
            _attach_sources(context["outcome"]["results"])
            context["conversation_id"] = conversation.pk if conversation else ""
            share = outcome.used_tokens * 100 // max(outcome.budget_tokens, 1)
            context["budget_share"] = min(share, 100)
        except (Invalid, Refused) as exc:
            context["error"] = _errors(exc)
    template = "memory/recall/recall.html"
    if request.htmx:
        template += "#results"
    return render(request, template, context)


def _attach_sources(results: list[dict]) -> None:
    """The playground shows each memory result's sources as links (one query for the page)."""
    from knowledge.models import MemorySource

    ids = [r["id"] for r in results if r["kind"] == "memory"]
    if not ids:
        return
    by_memory: dict[int, list] = {}
    for row in (
        MemorySource.objects.filter(memory_id__in=ids)
        .order_by("id")
        .values("memory_id", "kind", "ref", "state")
    ):
        by_memory.setdefault(row["memory_id"], []).append(row)
    for r in results:
        if r["kind"] == "memory":
            r["sources"] = by_memory.get(r["id"], [])


@reviewer_required
def browse(request, kind, pk):
    """memory_browse in the console: the thread, episode, entry, memory or conversation behind a
    recall result (reviewers see every store; inside a conversation only its scope)."""
    if kind not in KINDS:
        raise Http404("Unknown kind.")
    conversation = None
    if request.GET.get("conversation", "").isdigit():
        conversation = get_object_or_404(Conversation, pk=int(request.GET["conversation"]))
    data = Browser(request.principal, conversation).open(kind, pk)
    # The messages to show: a message's thread or neighbours, an episode's, a thread's or a
    # conversation's (a thread's own "thread" is its name, not a list).
    lines = next(
        (v for k in ("thread", "context", "messages") if isinstance(v := data.get(k), list) and v), []
    )
    # A message (and a thread opened at one) is named by its message; the template only reads
    # these, never a lookup as a filter argument.
    hit = (data.get("message") or {}).get("id")
    context = {
        "kind": kind,
        "data": data,
        "lines": lines,
        "conversation": conversation,
        "title_id": data.get("id") or hit or pk,
        "hit_id": hit,
    }
    return render(request, "memory/recall/browse.html", context)


@reviewer_required
def memo_edit(request, name):
    """The pinned memo of one agent: everyone with a role sees it and its budget; admins edit it.
    `preview` (htmx, while typing) only recounts tokens."""
    agent = names.agent_named(name)
    memo = memo_for(agent)
    text = memo.text
    if request.method == "POST":
        text = request.POST.get("text", "")
        if request.POST.get("preview"):
            return render(
                request,
                "memory/recall/memo.html#budget",
                {"tokens": count_tokens(text.strip()), "budget": memo_budget_tokens()},
            )
        access.require_role(request.principal, ADMIN, "Only admins edit pinned memos.")
        version = _int(request.POST.get("version"), None, 0, 2**31)
        try:
            memo_update(
                actor=request.principal,
                agent=agent,
                text=text,
                expected_version=version,
                reason=request.POST.get("reason", "")[:500],
            )
            messages.success(request, "Pinned memo saved.")
            return redirect("agent-memo", name=agent.name)
        except Invalid as exc:
            messages.error(request, _errors(exc))
        except MemoChanged as exc:
            messages.error(request, str(exc.detail))
    info = memo_out(memo)
    context = {
        "agent": agent,
        "memo": info,
        "text": text,
        "tokens": count_tokens(text.strip()),
        "budget": memo_budget_tokens(),
    }
    return render(request, "memory/recall/memo.html", context)
