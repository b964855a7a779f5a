"""Input and output serializers of the recall API (search, browse, the pinned memo, context)."""

from drf_spectacular.utils import (
    PolymorphicProxySerializer,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from knowledge.web import SLUG, StrictCharField, StrictSerializer, times_fields
from memory.history.section import DEFAULT_TURNS, MAX_TURNS
from memory.recall import ROUTES
from memory.recall.browse import KINDS
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
        help_text="Run only these routes (diagnostics; no second hop then); all four and the "
        "second hop by default.",
    )


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
        **times_fields(),
        "tokens": serializers.IntegerField(),
        "score": serializers.FloatField(),
        "fused": serializers.FloatField(),
        "decay": serializers.FloatField(),
        "rerank": serializers.FloatField(allow_null=True),
        "routes": serializers.DictField(
            child=SearchRouteHitSerializer(), help_text="Rank and score in each route that found it."
        ),
        "time": serializers.DateTimeField(
            allow_null=True,
            help_text="What recall's age decay reads: a message's ts, an episode's end, a memory's or "
            "entry's last change. When it held is held_from / held_until.",
        ),
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


SearchOut = inline_serializer(
    "SearchResults",
    {
        "query": serializers.CharField(),
        "now": serializers.DateTimeField(),
        "k": serializers.IntegerField(),
        "budget_tokens": serializers.IntegerField(),
        "used_tokens": serializers.IntegerField(),
        "left_out": serializers.IntegerField(
            help_text="Candidates among the first k left out below the relevance floor."
        ),
        "scope": SearchScopeSerializer(),
        "routes": serializers.DictField(child=RouteRunOut, help_text="What each route did."),
        "reranker": serializers.CharField(),
        "embedding_ms": serializers.FloatField(),
        "results": serializers.ListField(child=SearchResultOut),
    },
)


class BrowseIn(StrictSerializer):
    """memory_browse's arguments as one object (the API takes them from the path and query)."""

    kind = serializers.ChoiceField(choices=list(KINDS))
    id = serializers.IntegerField(min_value=1)
    conversation = serializers.IntegerField(required=False, min_value=1)


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
    held_from, held_until, learned_at = times_fields().values()


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
    held_from, held_until, learned_at = times_fields().values()
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
        **times_fields(),
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
        "left_out": serializers.IntegerField(
            required=False,
            help_text="recalled_memory only: candidates left out below the relevance floor.",
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
