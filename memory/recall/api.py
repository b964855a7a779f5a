"""API: memory_search, memory_browse, the pinned memo and context compilation."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from knowledge import access
from knowledge.models import Agent, Channel, Conversation
from knowledge.principals.permissions import IsAgentOrReviewer
from knowledge.principals.principal import Principal
from knowledge.replica import replica_reads
from knowledge.schema import error_response
from knowledge.web import StrictCharField, StrictSerializer
from memory.conversations.api import SLUG
from memory.history.section import DEFAULT_TURNS, MAX_TURNS
from memory.recall import ROUTES, memory_search, resolve_scope
from memory.recall.browse import KINDS, Browser
from memory.recall.context import context_compile
from memory.recall.memo import memo_as_dict, memo_for, memo_update
from memory.recall.present import outcome_dict
from memory.recall.search import MAX_BUDGET, MAX_K


class ScopeIn(StrictSerializer):
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


RESULT_KINDS = ["memory", "entry", "message", "episode"]


class SearchRouteHitSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    score = serializers.FloatField()


RouteRunOut = inline_serializer(
    "SearchRouteRun",
    {
        "ran": serializers.BooleanField(),
        "hits": serializers.IntegerField(),
        "ms": serializers.FloatField(
            help_text="Milliseconds of the database round trips the route took part in (the routes' "
            "statements are sent together, so routes share them)."
        ),
        "reason": serializers.CharField(help_text="Why the route did not run (empty when it ran)."),
    },
)
ResultMessageOut = inline_serializer(
    "SearchResultMessage",
    {
        "id": serializers.IntegerField(),
        "external_id": serializers.CharField(allow_null=True),
        "speaker": serializers.CharField(),
        "ts": serializers.DateTimeField(),
        "hit": serializers.BooleanField(
            help_text="This message is one the routes found (an episode lists its message hits)."
        ),
    },
)
_KIND_FIELD = {"required": False, "help_text": "Memories and entries only."}
_EVIDENCE_FIELD = {"required": False, "help_text": "Messages and episodes only."}
SearchResultOut = inline_serializer(
    "SearchResult",
    {
        "kind": serializers.ChoiceField(choices=RESULT_KINDS),
        "id": serializers.IntegerField(),
        "text": serializers.CharField(help_text="What the agent reads: the hit with its expansion."),
        "tokens": serializers.IntegerField(),
        "score": serializers.FloatField(),
        "fused": serializers.FloatField(),
        "decay": serializers.FloatField(),
        "rerank": serializers.FloatField(allow_null=True),
        "routes": serializers.DictField(
            child=SearchRouteHitSerializer(), help_text="Rank and score in each route that found it."
        ),
        "time": serializers.DateTimeField(allow_null=True),
        "store": serializers.CharField(**_KIND_FIELD),
        "owner": serializers.CharField(**_KIND_FIELD),
        "tier": serializers.CharField(required=False, help_text="Memories only."),
        "category": serializers.CharField(required=False, help_text="Memories only."),
        "confidence": serializers.FloatField(required=False, help_text="Memories only."),
        "entry": serializers.IntegerField(required=False, allow_null=True, help_text="Memories only."),
        "valid_from": serializers.DateTimeField(required=False, allow_null=True, help_text="Memories only."),
        "valid_to": serializers.DateTimeField(required=False, allow_null=True, help_text="Memories only."),
        "conflict_with": serializers.ListField(
            child=serializers.IntegerField(),
            required=False,
            help_text="Memories only: active memories with its key that say otherwise over the same "
            "time (a conflict still in force; only the newest is returned, with a note in `text`).",
        ),
        "name": serializers.CharField(required=False, help_text="Entries only."),
        "type": serializers.CharField(required=False, help_text="Entries only."),
        "channel": serializers.CharField(**_EVIDENCE_FIELD),
        "thread": serializers.CharField(**_EVIDENCE_FIELD),
        "external_id": serializers.CharField(required=False, allow_null=True, help_text="Messages only."),
        "speaker": serializers.CharField(required=False, help_text="Messages only."),
        "topic": serializers.CharField(required=False, help_text="Episodes only."),
        "messages": serializers.ListField(child=ResultMessageOut, **_EVIDENCE_FIELD),
        "expanded_external_ids": serializers.ListField(
            child=serializers.CharField(allow_null=True),
            required=False,
            help_text="Messages and episodes only: the messages added around the hit.",
        ),
    },
)


class SearchScopeSerializer(serializers.Serializer):
    agent = serializers.CharField()
    conversation = serializers.IntegerField(allow_null=True)
    channel = serializers.CharField(allow_null=True)
    thread = serializers.CharField()
    read_stores = serializers.ListField(child=serializers.CharField())
    write_store = serializers.CharField()


@replica_reads
def search_for(principal: Principal, v: dict) -> dict:
    """Run memory_search from validated `SearchIn` data (the API and the MCP server)."""
    outcome = memory_search(
        scope_from(principal, v),
        q=v["q"],
        k=v["k"],
        budget_tokens=v["budget_tokens"],
        now=v.get("now"),
        routes=tuple(v.get("routes") or ROUTES),
    )
    return outcome_dict(outcome)


SearchOut = inline_serializer(
    "SearchResults",
    {
        "query": serializers.CharField(),
        "now": serializers.DateTimeField(),
        "k": serializers.IntegerField(),
        "budget_tokens": serializers.IntegerField(),
        "used_tokens": serializers.IntegerField(),
        "scope": SearchScopeSerializer(),
        "routes": serializers.DictField(child=RouteRunOut, help_text="What each route did."),
        "reranker": serializers.CharField(),
        "embedding_ms": serializers.FloatField(),
        "results": serializers.ListField(child=SearchResultOut),
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
    return Response(search_for(request.user, data.validated_data))


class BrowseIn(StrictSerializer):
    """memory_browse's arguments as one object (the API takes them from the path and query)."""

    kind = serializers.ChoiceField(choices=list(KINDS))
    id = serializers.IntegerField(min_value=1)
    conversation = serializers.IntegerField(required=False, min_value=1)


def browse_open(principal: Principal, *, kind: str, pk: int, conversation: int | None = None) -> dict:
    """Open the thing behind a result, inside `conversation`'s scope when one is named (404
    for an unknown conversation; what the principal may not see is refused by the Browser)."""
    conv = None
    if conversation:
        conv = get_object_or_404(Conversation.objects.select_related("agent"), pk=conversation)
    return Browser(principal, conv).open(kind, pk)


def _kind(value: str):
    """The `kind` of one browse answer: exactly `value`, so each answer matches one form."""

    @extend_schema_field({"type": "string", "enum": [value]})
    class KindField(serializers.CharField):
        pass

    return KindField()


class BrowseMessageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    external_id = serializers.CharField(allow_null=True)
    channel = serializers.CharField()
    thread = serializers.CharField()
    speaker = serializers.CharField()
    ts = serializers.DateTimeField()
    text = serializers.CharField()


class BrowsedMessageSerializer(serializers.Serializer):
    kind = _kind("message")
    message = BrowseMessageSerializer()
    thread = BrowseMessageSerializer(many=True, required=False, help_text="Its thread, when it has one.")
    context = BrowseMessageSerializer(
        many=True, required=False, help_text="A lone message: it with its neighbours in the channel."
    )
    episode = serializers.IntegerField(required=False, help_text="The episode that covers it.")


class BrowsedThreadSerializer(serializers.Serializer):
    kind = _kind("thread")
    channel = serializers.CharField()
    thread = serializers.CharField()
    messages = BrowseMessageSerializer(many=True)


class BrowsedEpisodeSerializer(serializers.Serializer):
    kind = _kind("episode")
    id = serializers.IntegerField()
    channel = serializers.CharField()
    thread = serializers.CharField()
    topic = serializers.CharField()
    summary = serializers.CharField()
    likely_question = serializers.CharField()
    resolution = serializers.CharField()
    related_systems = serializers.ListField(child=serializers.CharField())
    start_ts = serializers.DateTimeField()
    end_ts = serializers.DateTimeField()
    evidence = serializers.ListField(child=serializers.IntegerField(), help_text="Message ids.")
    messages = BrowseMessageSerializer(many=True)


class BrowsedEntrySerializer(serializers.Serializer):
    kind = _kind("entry")
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField())
    summary = serializers.CharField()
    properties = serializers.DictField()
    store = serializers.CharField()
    owner = serializers.CharField()
    updated_at = serializers.DateTimeField()
    blocks = serializers.ListField(
        child=inline_serializer(
            "BrowsedBlock",
            {
                "id": serializers.IntegerField(),
                "text": serializers.CharField(),
                "version": serializers.IntegerField(),
                "author": serializers.CharField(help_text="kind:name"),
            },
        )
    )


class BrowsedMemorySerializer(serializers.Serializer):
    kind = _kind("memory")
    id = serializers.IntegerField()
    text = serializers.CharField()
    key = serializers.CharField()
    value = serializers.JSONField(allow_null=True)
    tier = serializers.CharField()
    category = serializers.CharField()
    status = serializers.CharField()
    stale = serializers.BooleanField()
    confidence = serializers.FloatField()
    store = serializers.CharField()
    owner = serializers.CharField()
    entry = serializers.IntegerField(allow_null=True)
    valid_from = serializers.DateTimeField(allow_null=True)
    valid_to = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    version = serializers.IntegerField()
    updated_at = serializers.DateTimeField()
    sources = serializers.ListField(
        child=inline_serializer(
            "BrowsedSource",
            {
                "kind": serializers.CharField(),
                "ref": serializers.CharField(),
                "state": serializers.CharField(
                    help_text="At the last provenance check: unchanged, changed, deleted, or untracked "
                    "(no state of it is known: its owning system never pushed it)."
                ),
                "opened": serializers.DictField(
                    required=False,
                    help_text="An internal source in scope, opened as browse opens its kind (a memory "
                    "shows only kind, id, text and status).",
                ),
            },
        )
    )
    links = serializers.ListField(
        help_text="Memories this one links to (its nearest neighbours in its store, both ways), "
        "those in scope only, nearest first.",
        child=inline_serializer(
            "BrowsedLink",
            {
                "id": serializers.IntegerField(),
                "text": serializers.CharField(),
                "store": serializers.CharField(),
                "status": serializers.CharField(),
                "similarity": serializers.FloatField(),
                "plan": serializers.IntegerField(allow_null=True, help_text="The plan that made the link."),
            },
        ),
    )


class BrowsedConversationSerializer(serializers.Serializer):
    kind = _kind("conversation")
    id = serializers.IntegerField()
    agent = serializers.CharField()
    channel = serializers.CharField()
    thread = serializers.CharField()
    status = serializers.CharField()
    read_stores = serializers.ListField(child=serializers.CharField())
    write_store = serializers.CharField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    messages = BrowseMessageSerializer(many=True)


BrowseOut = PolymorphicProxySerializer(
    "Browsed",
    serializers=[
        BrowsedMessageSerializer,
        BrowsedThreadSerializer,
        BrowsedEpisodeSerializer,
        BrowsedEntrySerializer,
        BrowsedMemorySerializer,
        BrowsedConversationSerializer,
    ],
    resource_type_field_name=None,
)


@extend_schema(
    responses={200: BrowseOut},
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
    raw = request.query_params.get("conversation")
    if raw and not raw.isdigit():
        raise ValidationError({"conversation": ["A conversation id is a number."]})
    return Response(browse_open(request.user, kind=kind, pk=pk, conversation=int(raw) if raw else None))


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


class MemoIn(StrictSerializer):
    text = serializers.CharField(allow_blank=True, max_length=50_000, trim_whitespace=False)
    version = serializers.IntegerField(
        required=False, min_value=0, help_text="The version you edited; 409 if it changed meanwhile."
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


@extend_schema(
    methods=["GET"], responses={200: MemoOut}, summary="The agent's pinned memo, its tokens and budget"
)
@extend_schema(
    methods=["PUT"],
    request=MemoIn,
    responses={200: MemoOut, 409: error_response("`version` is not the current one.")},
    summary="Replace the pinned memo (admins)",
    description="400 when the text counts more tokens than BRAIN_MEMO_BUDGET_TOKENS; 409 when "
    "`version` is given and another version was saved meanwhile.",
)
@api_view(["GET", "PUT"])
@permission_classes([IsAgentOrReviewer])
def memo_view(request, agent: str):
    agent_obj = access.agent_get_for(
        request.user, agent, refusal="An agent may read only its own memo and context."
    )
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


class ContextIn(StrictSerializer):
    conversation = serializers.IntegerField(required=False, min_value=1)
    channel = serializers.RegexField(SLUG, max_length=100, required=False)
    q = StrictCharField(max_length=2000, allow_blank=True)
    budget_tokens = serializers.IntegerField(required=False, default=4000, min_value=1, max_value=MAX_BUDGET)
    now = serializers.DateTimeField(required=False)
    history_turns = serializers.IntegerField(
        required=False,
        default=DEFAULT_TURNS,
        min_value=0,
        max_value=MAX_TURNS,
        help_text="The last turns of the conversation given verbatim in the history section, after a "
        "rolling summary of the earlier ones; 0 leaves the section out.",
    )

    def validate(self, data):
        if not data.get("conversation") and not data.get("channel"):
            raise ValidationError({"conversation": ["Give a conversation (id) or a channel (name)."]})
        return data


ContextItemOut = inline_serializer(
    "CompiledContextItem",
    {
        "kind": serializers.ChoiceField(choices=RESULT_KINDS),
        "id": serializers.IntegerField(),
        "tokens": serializers.IntegerField(),
        "forced": serializers.BooleanField(required=False, help_text="Put first by the caller (the gate)."),
        "score": serializers.FloatField(required=False),
        "relevance": serializers.FloatField(required=False),
        "recency": serializers.FloatField(required=False),
        "confidence": serializers.FloatField(required=False),
        "density": serializers.FloatField(required=False),
        "conflict_with": serializers.ListField(
            child=serializers.IntegerField(),
            required=False,
            help_text="A memory in a conflict still in force: the ids it conflicts with (noted in the text).",
        ),
    },
)
HistoryTurnOut = inline_serializer(
    "HistoryTurn",
    {
        "id": serializers.IntegerField(help_text="The message."),
        "speaker": serializers.CharField(),
        "ts": serializers.DateTimeField(),
        "tokens": serializers.IntegerField(),
        "truncated": serializers.BooleanField(),
    },
)


class HistorySummaryOut(serializers.Serializer):
    text = serializers.CharField()
    tokens = serializers.IntegerField()
    truncated = serializers.BooleanField(
        help_text="Cut to fit the budget here (the stored summary is whole)."
    )
    turns = serializers.IntegerField(help_text="Turns folded into it.")
    skipped = serializers.IntegerField(help_text="Earlier turns left out, over a fold's limit.")
    through_message = serializers.IntegerField(allow_null=True, help_text="The last message folded in.")
    method = serializers.ChoiceField(choices=["model", "extractive"])
    version = serializers.CharField()
    note = serializers.CharField(help_text="Why the last fold did not use the model, if it did not.")
    updated_at = serializers.DateTimeField()


ContextSectionOut = inline_serializer(
    "CompiledContextSection",
    {
        "name": serializers.ChoiceField(
            choices=["instructions", "pinned_memo", "skills", "history", "recalled_memory"]
        ),
        "text": serializers.CharField(),
        "tokens": serializers.IntegerField(),
        "budget_tokens": serializers.IntegerField(required=False, help_text="pinned_memo only."),
        "version": serializers.IntegerField(required=False, help_text="pinned_memo only."),
        "items": serializers.ListField(
            child=ContextItemOut, required=False, help_text="recalled_memory only: what it holds, in order."
        ),
        "overlay_budget_tokens": serializers.IntegerField(required=False, help_text="skills only."),
        "skills": serializers.ListField(
            child=serializers.DictField(),
            required=False,
            help_text="skills only: per enabled skill its name, version, tokens (base, overlay), whether "
            "it was cut, and the lessons it holds.",
        ),
        "turns": serializers.ListField(
            child=HistoryTurnOut,
            required=False,
            help_text="history only: the turns given verbatim, oldest first.",
        ),
        "summary": HistorySummaryOut(
            required=False,
            allow_null=True,
            help_text="history only: the rolling summary of the earlier turns.",
        ),
        "note": serializers.CharField(required=False, help_text="history only: why it is empty, if it is."),
    },
)
ContextOut = inline_serializer(
    "CompiledContext",
    {
        "agent": serializers.CharField(),
        "scope": SearchScopeSerializer(),
        "query": serializers.CharField(),
        "now": serializers.DateTimeField(),
        "budget_tokens": serializers.IntegerField(),
        "total_tokens": serializers.IntegerField(),
        "truncated": serializers.ListField(child=serializers.CharField()),
        "sections": serializers.ListField(child=ContextSectionOut),
    },
)


def context_for(principal: Principal, agent: Agent, v: dict) -> dict:
    """Compile `agent`'s context from validated `ContextIn` data, inside the scope `principal`
    may read (the API and the MCP server both compile through here)."""
    scope = scope_from(principal, {**v, "agent": agent.name})
    return context_compile(
        scope, q=v["q"], budget_tokens=v["budget_tokens"], now=v.get("now"), history_turns=v["history_turns"]
    )


@extend_schema(
    request=ContextIn,
    responses={200: ContextOut},
    summary="Compile the agent's context for one turn",
    description="Sections: instructions, pinned memo, skills (each enabled skill's base instructions and "
    "the agent's overlay of lessons), history (the conversation's last `history_turns` turns verbatim after "
    "a rolling summary of the earlier ones, kept per conversation), recalled memory (scored relevance × recency × "
    "confidence × density), each with its token count; the total never exceeds `budget_tokens`.",
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def context_view(request, agent: str):
    agent_obj = access.agent_get_for(
        request.user, agent, refusal="An agent may read only its own memo and context."
    )
    data = ContextIn(data=request.data)
    data.is_valid(raise_exception=True)
    return Response(context_for(request.user, agent_obj, data.validated_data))
