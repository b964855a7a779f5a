"""API: memory_search, memory_browse, the pinned memo, context compilation and status."""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from knowledge.api_fields import StrictCharField
from knowledge.models import Agent, Channel, Conversation
from knowledge.principals import Principal
from memory.api_conversations import SLUG, IsAgentOrReviewer
from memory.browse import KINDS, Browser
from memory.context import context_compile
from memory.memo import memo_as_dict, memo_for, memo_update
from memory.recall import ROUTES, memory_search, resolve_scope
from memory.recall.present import outcome_dict
from memory.recall.search import MAX_BUDGET, MAX_K
from memory.status import alerts, job_status, recall_status


class ScopeIn(serializers.Serializer):
    agent = serializers.RegexField(SLUG, max_length=64)
    conversation = serializers.IntegerField(required=False, min_value=1)
    channel = serializers.RegexField(SLUG, max_length=100, required=False)
    now = serializers.DateTimeField(required=False, help_text="Time used for decay (replays history).")

    def validate(self, data):
        if not data.get("conversation") and not data.get("channel"):
            raise ValidationError({"conversation": ["Give a conversation (id) or a channel (name)."]})
        return data


class SearchIn(ScopeIn):
    q = StrictCharField(max_length=2000)
    k = serializers.IntegerField(required=False, default=10, min_value=1, max_value=MAX_K)
    budget_tokens = serializers.IntegerField(required=False, default=2000, min_value=1, max_value=MAX_BUDGET)
    routes = serializers.ListField(
        child=serializers.ChoiceField(choices=list(ROUTES)),
        required=False,
        help_text="Run only these routes (diagnostics); all four by default.",
    )


def scope_from(principal: Principal, v: dict):
    """Resolve agent / conversation / channel names into a RecallScope (400 for unknown names,
    403/404 for what the caller may not see)."""
    if principal.kind == "agent" and principal.agent.name == v["agent"]:
        agent = principal.agent  # loaded with the token: an agent searching its own memory
    else:
        agent = Agent.objects.filter(name=v["agent"]).first()
    if agent is None:
        raise ValidationError({"agent": [f"Unknown agent {v['agent']}."]})
    conversation = channel = None
    if v.get("conversation"):
        conversation = get_object_or_404(Conversation.objects.select_related("channel"), pk=v["conversation"])
        if conversation.agent_id == agent.pk:
            conversation.agent = agent
    if v.get("channel"):
        channel = Channel.objects.filter(name=v["channel"]).select_related("person").first()
        if channel is None:
            raise ValidationError({"channel": [f"Unknown channel {v['channel']}."]})
    return resolve_scope(principal, agent=agent, conversation=conversation, channel=channel)


SearchOut = inline_serializer(
    "SearchResults",
    {
        "query": serializers.CharField(),
        "now": serializers.DateTimeField(),
        "k": serializers.IntegerField(),
        "budget_tokens": serializers.IntegerField(),
        "used_tokens": serializers.IntegerField(),
        "scope": serializers.DictField(),
        "routes": serializers.DictField(),
        "results": serializers.ListField(child=serializers.DictField()),
    },
)


@extend_schema(
    request=SearchIn,
    responses={200: SearchOut},
    summary="memory_search: hybrid recall inside a conversation's scope",
    description="Four routes — keyword over entries and memories, vector over memories and entry "
    "blocks, keyword over messages, vector over episode summaries (and over messages no episode "
    "covers yet) — fused (a weighted sum of each route's normalised scores), decayed by age as of "
    "`now`, optionally reranked; `k` results, one ranked hit each, expanded (a thread, a lone "
    "message's neighbours, an episode's messages; context shown once), each result capped "
    "and all results together within `budget_tokens` (counted by Brain's token counter on the "
    "`text` fields). Each result gives its rank and score in every route that found it. Only "
    "active, unexpired memories are recalled. With embeddings off the keyword routes still answer.",
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def memory_search_view(request):
    data = SearchIn(data=request.data)
    data.is_valid(raise_exception=True)
    v = data.validated_data
    scope = scope_from(request.user, v)
    outcome = memory_search(
        scope,
        q=v["q"],
        k=v["k"],
        budget_tokens=v["budget_tokens"],
        now=v.get("now"),
        routes=tuple(v.get("routes") or ROUTES),
    )
    return Response(outcome_dict(outcome))


@extend_schema(
    responses={200: OpenApiTypes.OBJECT},
    parameters=[
        OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=list(KINDS)),
        OpenApiParameter(
            "conversation", int, description="Browse inside this conversation's scope (agents)."
        ),
    ],
    summary="memory_browse: the full thread, episode, entry, memory or conversation behind a result",
)
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def memory_browse_view(request, kind: str, pk: int):
    conversation = None
    raw = request.query_params.get("conversation")
    if raw:
        if not raw.isdigit():
            raise ValidationError({"conversation": ["A conversation id is a number."]})
        conversation = get_object_or_404(Conversation.objects.select_related("agent"), pk=int(raw))
    return Response(Browser(request.user, conversation).open(kind, pk))


# --- pinned memo ------------------------------------------------------------------------------

MemoOut = inline_serializer(
    "PinnedMemo",
    {
        "agent": serializers.CharField(),
        "text": serializers.CharField(),
        "tokens": serializers.IntegerField(),
        "budget_tokens": serializers.IntegerField(),
        "version": serializers.IntegerField(),
        "updated_at": serializers.DateTimeField(allow_null=True),
        "updated_by": serializers.CharField(),
    },
)


class MemoIn(serializers.Serializer):
    text = serializers.CharField(allow_blank=True, max_length=50_000, trim_whitespace=False)
    version = serializers.IntegerField(
        required=False, min_value=0, help_text="The version you edited; 409 if it changed meanwhile."
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


def _agent_for(principal: Principal, name: str) -> Agent:
    agent = get_object_or_404(Agent, name=name)
    if principal.kind == "agent" and principal.agent.pk != agent.pk:
        raise PermissionDenied("An agent may read only its own memo and context.")
    return agent


@extend_schema(
    methods=["GET"], responses={200: MemoOut}, summary="The agent's pinned memo, its tokens and budget"
)
@extend_schema(
    methods=["PUT"],
    request=MemoIn,
    responses={200: MemoOut},
    summary="Replace the pinned memo (admins)",
    description="400 when the text counts more tokens than BRAIN_MEMO_BUDGET_TOKENS; 409 when "
    "`version` is given and another version was saved meanwhile.",
)
@api_view(["GET", "PUT"])
@permission_classes([IsAgentOrReviewer])
def memo_view(request, agent: str):
    agent_obj = _agent_for(request.user, agent)
    if request.method == "PUT":
        if not request.user.is_admin:
            raise PermissionDenied("Only admins edit pinned memos.")
        data = MemoIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        memo = memo_update(
            actor=request.user,
            agent=agent_obj,
            text=v["text"],
            expected_version=v.get("version"),
            reason=v["reason"],
        )
        return Response(memo_as_dict(memo))
    return Response(memo_as_dict(memo_for(agent_obj)))


# --- context ----------------------------------------------------------------------------------


class ContextIn(serializers.Serializer):
    conversation = serializers.IntegerField(required=False, min_value=1)
    channel = serializers.RegexField(SLUG, max_length=100, required=False)
    q = StrictCharField(max_length=2000, allow_blank=True)
    budget_tokens = serializers.IntegerField(required=False, default=4000, min_value=1, max_value=MAX_BUDGET)
    now = serializers.DateTimeField(required=False)

    def validate(self, data):
        if not data.get("conversation") and not data.get("channel"):
            raise ValidationError({"conversation": ["Give a conversation (id) or a channel (name)."]})
        return data


ContextOut = inline_serializer(
    "CompiledContext",
    {
        "agent": serializers.CharField(),
        "budget_tokens": serializers.IntegerField(),
        "total_tokens": serializers.IntegerField(),
        "truncated": serializers.ListField(child=serializers.CharField()),
        "sections": serializers.ListField(child=serializers.DictField()),
    },
)


@extend_schema(
    request=ContextIn,
    responses={200: ContextOut},
    summary="Compile the agent's context for one turn",
    description="Sections: instructions, pinned memo, recalled memory (scored relevance × recency × "
    "confidence × density), each with its token count; the total never exceeds `budget_tokens`.",
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def context_view(request, agent: str):
    agent_obj = _agent_for(request.user, agent)
    data = ContextIn(data=request.data)
    data.is_valid(raise_exception=True)
    v = data.validated_data
    scope = scope_from(request.user, {**v, "agent": agent_obj.name})
    return Response(context_compile(scope, q=v["q"], budget_tokens=v["budget_tokens"], now=v.get("now")))


# --- status -----------------------------------------------------------------------------------


@extend_schema(
    responses={200: OpenApiTypes.OBJECT},
    summary="Health: alerts, embedding configuration, vector coverage and backlog per kind, jobs",
    description="`alerts` lists what needs a person, most urgent first. `jobs.recent_failures` "
    "(task results may quote stored text) is given to reviewers and admins only.",
)
@api_view(["GET"])
def status_view(request):
    status = recall_status()
    jobs = job_status()
    payload = {**status, "jobs": jobs, "alerts": alerts(status, jobs)}
    if not request.user.is_reviewer:
        payload["jobs"] = {k: v for k, v in jobs.items() if k != "recent_failures"}
    return Response(payload)
