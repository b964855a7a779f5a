"""Small input/output serializers for the memory API. No business logic here: services decide."""

from typing import NamedTuple

from rest_framework import serializers

from knowledge import access
from knowledge.models import Memory, MemorySource
from knowledge.principal import Principal
from knowledge.stores import SELF
from knowledge.web import BoundedJSONField, StrictCharField, StrictSerializer, times_fields, times_out
from memory.lifecycle import queue
from memory.lifecycle.activation_hooks import AGENT_STATE, API_WRITE
from memory.lifecycle.write import MAX_TEXT

MAX_SOURCES = 50


class SourceSerializer(StrictSerializer):
    kind = serializers.ChoiceField(choices=MemorySource.KINDS)
    ref = serializers.CharField(max_length=300)


class MemoryWriteSerializer(StrictSerializer):
    agent = serializers.SlugField(
        max_length=64, required=False, help_text="Owner agent; an agent token may name only itself (default)."
    )
    scope = StrictCharField(
        max_length=120,
        help_text="agent (= self), shared (or workspace), private:<person>, channel:<channel>.",
    )
    text = StrictCharField(
        max_length=MAX_TEXT, required=False, help_text="Required unless both key and value are given."
    )
    sources = SourceSerializer(many=True, required=False, max_length=MAX_SOURCES)
    tier = serializers.ChoiceField(choices=Memory.TIER_ORDER, default=Memory.SEMANTIC)
    category = StrictCharField(max_length=40, required=False, allow_blank=True, default="")
    key = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    value = BoundedJSONField(required=False, allow_null=True, default=None)
    confidence = serializers.FloatField(min_value=0, max_value=1, default=1.0)
    supersedes = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)
    valid_from = serializers.DateTimeField(required=False, allow_null=True, default=None)
    valid_to = serializers.DateTimeField(required=False, allow_null=True, default=None)
    expires_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Working and episodic tiers only; default now + BRAIN_SHORT_TERM_TTL hours.",
    )
    run_id = StrictCharField(max_length=100, required=False, allow_blank=True, default="")
    turn = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
    event_id = StrictCharField(max_length=100, required=False, allow_blank=True, default="")
    conversation = serializers.IntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        default=None,
        help_text="One of the agent's conversations; its working memories are cleared when it finishes.",
    )
    state = serializers.BooleanField(
        default=False,
        help_text="Machine state (a counter, a cursor, a LangGraph store item), not a fact: the agent's "
        "own working memory in its own store (scope agent, tier working, the default then), active at "
        "once without review — recalled only for that agent, expiring like any working memory.",
    )

    def validate(self, attrs):
        if attrs.get("state"):
            errors = {}
            if access.SCOPE_ALIASES.get(attrs.get("scope"), attrs.get("scope")) != SELF:
                errors["scope"] = ["State lives in the agent's own store: use scope agent."]
            if "tier" not in self.initial_data:
                attrs["tier"] = Memory.WORKING
            elif attrs["tier"] != Memory.WORKING:
                errors["tier"] = ["State is working memory: use tier working (or leave it out)."]
            if errors:
                raise serializers.ValidationError(errors)
        return attrs


def write_route(data: dict) -> str:
    """The activation route of a parsed write (taking `state` out of `data`): the agent's own
    state (AGENT_STATE), or an ordinary API write that an untrusted agent's review decides."""
    return AGENT_STATE if data.pop("state", False) else API_WRITE


def _facet(name: str, help_text: str) -> serializers.ChoiceField:
    """A filter of the review queue's (memory.lifecycle.queue) with its fixed values; an unknown
    value is a 400 that lists them."""
    values = queue.FACET_CHOICES[name]
    listed = ", ".join(values)
    return serializers.ChoiceField(
        choices=values,
        required=False,
        help_text=help_text,
        error_messages={"invalid_choice": f'Unknown value "{{input}}"; one of: {listed}.'},
    )


class MemoryListQuerySerializer(StrictSerializer):
    status = serializers.ChoiceField(choices=[s for s, _ in Memory.STATUSES], required=False)
    tier = serializers.ChoiceField(choices=Memory.TIER_ORDER, required=False)
    category = StrictCharField(max_length=40, required=False)
    store = serializers.CharField(
        max_length=120, required=False, help_text="A store or scope (agent = self)."
    )
    agent = serializers.SlugField(max_length=64, required=False)
    key = StrictCharField(max_length=200, required=False)
    q = serializers.CharField(max_length=200, required=False, help_text="Words in the text or key.")
    stale = serializers.BooleanField(required=False, allow_null=True, default=None)
    pinned = serializers.BooleanField(required=False, allow_null=True, default=None)
    reason = _facet(
        "reason",
        "Why a queued memory waits for review (with status=queued): new, conflict, requeued (a source "
        "changed), merge, gate (the eval gate), supersedes (it retires another agent's memory).",
    )
    source = _facet("source", "Memories citing a source of this kind.")
    author = StrictCharField(
        max_length=150, required=False, help_text="Who wrote it: an agent's, a person's or a route's name."
    )
    age = _facet("age", "How long it has waited: day (under one), week (1–7 days), month (7–30), older.")
    facets = serializers.BooleanField(
        default=False,
        help_text="With status=queued: add `facets`, for each filter the count of each of its values "
        "under the rest of the filter (as the console's queue shows them).",
    )
    order = serializers.ChoiceField(
        choices=queue.ORDERS,
        default=queue.NEWEST,
        help_text="newest (default) or oldest first — the review queue's order is oldest.",
    )
    # page and page_size are read by knowledge.web.page_params, as every paged list reads them.

    def validate_store(self, value):
        return access.SCOPE_ALIASES.get(value, value)

    def validate(self, attrs):
        if attrs.get("reason") and attrs.get("status") != Memory.QUEUED:
            raise serializers.ValidationError(
                {"reason": ["A reason filters the review queue: add status=queued."]}
            )
        if attrs.get("facets") and attrs.get("status") != Memory.QUEUED:
            raise serializers.ValidationError(
                {"facets": ["Facets count the review queue: add status=queued."]}
            )
        return attrs


# `import` is a Python keyword, so the field the console's URL also calls import is declared here.
MemoryListQuerySerializer._declared_fields["import"] = _facet(
    "imported",
    "Memories an import brought (mem0: the Mem0 import; with store=private:<person>, one person's).",
)


class ReasonSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=2000)


class ApproveSerializer(StrictSerializer):
    text = StrictCharField(
        max_length=MAX_TEXT,
        required=False,
        help_text="Edit-then-approve: the reviewer's text becomes a new version.",
    )
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    supersedes = serializers.IntegerField(
        min_value=1, required=False, help_text="Also retire this memory (e.g. the one it contradicts)."
    )
    decision = serializers.ChoiceField(
        choices=["replace", "keep_both"],
        required=False,
        help_text="Required when the memory conflicts with active ones (same key, another value, "
        "overlapping validity): replace retires every one of them; keep_both closes them at "
        "`boundary`, where this memory starts. To keep neither, reject it.",
    )
    boundary = serializers.DateTimeField(
        required=False, help_text="keep_both: when the new value starts to hold (the others end)."
    )
    shown = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        max_length=1000,
        required=False,
        help_text="The memories the client showed as what approving retires or closes (what it "
        "supersedes, what it conflicts with): an approval that would touch any other is refused with "
        "409 naming it (`unseen`), and nothing changes. Left out, nothing is checked.",
    )


class KeepSerializer(StrictSerializer):
    decision = serializers.ChoiceField(
        choices=["replace", "keep_both"],
        help_text="replace: retire every active memory this one conflicts with; keep_both: they end "
        "at `boundary`, where this one starts.",
    )
    boundary = serializers.DateTimeField(
        required=False, help_text="keep_both: when this memory starts to hold."
    )
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class ReviseSerializer(StrictSerializer):
    text = StrictCharField(max_length=MAX_TEXT)
    reason = serializers.CharField(max_length=2000)


class PromoteSerializer(StrictSerializer):
    tier = serializers.ChoiceField(choices=Memory.TIER_ORDER, required=False)
    confidence = serializers.FloatField(min_value=0, max_value=1, required=False)


class RunFinishSerializer(StrictSerializer):
    agent = serializers.SlugField(
        max_length=64, required=False, help_text="Reviewers: limit to one agent's run."
    )


class AuthorSerializer(serializers.Serializer):
    kind = serializers.CharField()
    name = serializers.CharField()


class VersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    text = serializers.CharField()
    content_hash = serializers.CharField()
    author = AuthorSerializer()
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()


class RelatedSerializer(serializers.Serializer):
    memory = serializers.IntegerField()
    relation = serializers.ChoiceField(choices=["duplicate", "contradiction"])
    score = serializers.FloatField(help_text="How much of the subject the two share, 0–1.")
    why = serializers.CharField()


class MemorySerializer(serializers.Serializer):
    """The memory as the API returns it (documentation; `memory_out` builds it fast)."""

    id = serializers.IntegerField()
    agent = serializers.CharField()
    store = serializers.CharField()
    text = serializers.CharField()
    key = serializers.CharField()
    value = serializers.JSONField(allow_null=True)
    tier = serializers.CharField()
    category = serializers.CharField()
    confidence = serializers.FloatField()
    status = serializers.ChoiceField(choices=[s for s, _ in Memory.STATUSES])
    queue_reason = serializers.CharField()
    status_reason = serializers.CharField()
    stale = serializers.BooleanField()
    stale_reason = serializers.CharField()
    pinned = serializers.BooleanField()
    held_from, held_until, learned_at = times_fields().values()
    valid_from = serializers.DateTimeField(allow_null=True)
    valid_to = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    content_hash = serializers.CharField()
    version = serializers.IntegerField()
    supersedes = serializers.IntegerField(allow_null=True)
    superseded_by = serializers.IntegerField(allow_null=True)
    sources = SourceSerializer(many=True)
    author = AuthorSerializer()
    conversation = serializers.IntegerField(allow_null=True)
    run_id = serializers.CharField()
    turn = serializers.IntegerField(allow_null=True)
    event_id = serializers.CharField()
    entry = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    duplicate_of = serializers.IntegerField(
        required=False,
        help_text="A write that repeats a live memory exactly (same folded text, or same key and "
        "value): nothing was stored, and this is the memory that already says it. The sources "
        "the write cited that it lacked were added to it (audited as memory.sources_added).",
    )
    written = serializers.BooleanField(
        required=False, help_text="false beside `duplicate_of`: the write stored no new memory."
    )
    related = RelatedSerializer(
        many=True,
        required=False,
        help_text="A queued memory's, on GET /api/memory/{id}: the active memories it duplicates or "
        "contradicts, in the stores its agent may read (memory.matching.relations).",
    )


class MemoryDetailSerializer(MemorySerializer):
    versions = VersionSerializer(many=True)


class QueueFacetsSerializer(serializers.Serializer):
    """value → how many queued memories it matches under the rest of the filter, per filter."""

    reason = serializers.DictField(child=serializers.IntegerField())
    agent = serializers.DictField(child=serializers.IntegerField())
    store = serializers.DictField(child=serializers.IntegerField())
    tier = serializers.DictField(child=serializers.IntegerField())
    category = serializers.DictField(child=serializers.IntegerField())
    source = serializers.DictField(child=serializers.IntegerField())
    author = serializers.DictField(child=serializers.IntegerField())
    age = serializers.DictField(child=serializers.IntegerField())


QueueFacetsSerializer._declared_fields["import"] = serializers.DictField(child=serializers.IntegerField())


def facets_out(facets: dict) -> dict:
    """queue.queue_facets as the API names its parameters (`import`), without the empty category
    (no parameter selects it)."""
    out = {("import" if name == "imported" else name): counts for name, counts in facets.items()}
    out["category"] = {name: n for name, n in out["category"].items() if name}
    return out


class MemoryPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    page_size = serializers.IntegerField()
    pages = serializers.IntegerField()
    results = MemorySerializer(many=True)
    facets = QueueFacetsSerializer(required=False, help_text="Only with facets=true.")


class RunFinishedSerializer(serializers.Serializer):
    run_id = serializers.CharField()
    cleared = serializers.IntegerField()
    memory_ids = serializers.ListField(child=serializers.IntegerField())


def _dt(value):
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


class Shown(NamedTuple):
    """What of the ids around some memories a reader may be shown: the memories they supersede or
    are superseded by, and the (kind, ref) of their sources (knowledge.access)."""

    memories: set[int]
    sources: set[tuple[str, str]]


def _source_list(memory: Memory, sources=None) -> list[dict]:
    if sources is None:
        sources = getattr(memory, "source_list", None)
    if sources is None:
        sources = [{"kind": s.kind, "ref": s.ref} for s in memory.sources.all()]
    return sources


def shown_to(reader: Principal, memories: list[Memory]) -> Shown:
    """The ids around `memories` that `reader` may read, in a query per kind at most."""
    return Shown(
        access.memory_ids_readable(
            reader, {pk for m in memories for pk in (m.supersedes_id, m.superseded_by_id)}
        ),
        access.readable_sources(reader, [s for m in memories for s in _source_list(m)]),
    )


def memory_out(memory: Memory, sources=None, *, reader: Principal, shown: Shown | None = None) -> dict:
    """The API body of one memory (the fields of MemorySerializer) as `reader` sees it: the
    memories it supersedes or is superseded by, and its internal sources, are named only when the
    reader may read them (`shown`, looked up for a whole page by the caller, or here). `sources`
    defaults to the memory's prefetched sources, or the list a write just recorded."""
    sources = _source_list(memory, sources)
    if shown is None:
        memory.source_list = sources
        shown = shown_to(reader, [memory])
    sources = [s for s in sources if (s["kind"], str(s["ref"])) in shown.sources]
    readable = shown.memories
    return {
        "id": memory.pk,
        "agent": memory.owner.name,
        "store": memory.store,
        "text": memory.text,
        "key": memory.key,
        "value": memory.value,
        "tier": memory.tier,
        "category": memory.category,
        "confidence": memory.confidence,
        "status": memory.status,
        "queue_reason": memory.queue_reason,
        "status_reason": memory.status_reason,
        "stale": memory.stale,
        "stale_reason": memory.stale_reason,
        "pinned": memory.pinned,
        **times_out(memory),
        "valid_from": _dt(memory.valid_from),
        "valid_to": _dt(memory.valid_to),
        "expires_at": _dt(memory.expires_at),
        "content_hash": memory.content_hash,
        "version": memory.version,
        "supersedes": memory.supersedes_id if memory.supersedes_id in readable else None,
        "superseded_by": memory.superseded_by_id if memory.superseded_by_id in readable else None,
        "sources": sources,
        "author": {"kind": memory.author_kind, "name": memory.author_name},
        "conversation": memory.conversation_id,
        "run_id": memory.run_id,
        "turn": memory.turn,
        "event_id": memory.event_id,
        "entry": memory.entry_id,
        "created_at": _dt(memory.created_at),
        "updated_at": _dt(memory.updated_at),
        **(
            {"duplicate_of": memory.duplicate_of, "written": False}
            if getattr(memory, "duplicate_of", None)
            else {}
        ),
        **({"related": [r.as_dict() for r in memory.related]} if hasattr(memory, "related") else {}),
    }


def version_out(version) -> dict:
    return {
        "version": version.version,
        "text": version.text,
        "content_hash": version.content_hash,
        "author": {"kind": version.author_kind, "name": version.author_name},
        "reason": version.reason,
        "created_at": _dt(version.created_at),
    }
