"""The write service behind POST /api/memory, MCP and every other route that writes a new
memory: the field rules every writer shares, `memory_write` (decided by the one activation
function, stored through the one entrance knowledge.memories.activation.memory_rows_activate)
and its `memory.written` event."""

import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_record, snapshot
from knowledge.errors import Invalid, Refused
from knowledge.limits import MAX_MEMORY_TEXT
from knowledge.memories.activation import Activation, NewRow
from knowledge.memories.rows import memory_content_errors, memory_row_new, memory_sources_add
from knowledge.models import Agent, Conversation, Memory
from knowledge.principal import Principal
from memory.lifecycle.activation import activate, memory_activate
from memory.lifecycle.activation_hooks import AGENT_STATE, API_WRITE, IMPORT, is_own_scratch, working_ttl
from memory.lifecycle.common import QUEUE_NEW, memory_lock
from memory.lifecycle.conflicts import MemoryConflict, contradictions_mark_later, policy_violation_record
from memory.lifecycle.duplicates import exact_duplicate_for_write

MAX_TEXT = MAX_MEMORY_TEXT


def _author_of(actor: Principal) -> tuple[str, str]:
    return actor.kind_label, actor.name


def _write_rules(
    *,
    owner: Agent | None,
    text: str,
    key: str,
    value,
    tier: str,
    valid_from,
    valid_to,
    expires_at,
    conversation: Conversation | None,
    owner_label: str = "",
) -> tuple[str, dict]:
    """The rules on a memory's fields that hold for every writer: the text (or, without one, the
    text derived from key and value), validity order, expiry of short-term tiers only, and the
    conversation being one of the owner's. Returns the text and the field errors."""
    errors = {}
    if not (text or "").strip():
        if key and value is not None:
            rendered = json.dumps(value, sort_keys=True, ensure_ascii=False)
            text = f"{key} = {rendered}"[:MAX_TEXT]
        else:
            errors["text"] = ["Give the memory's text (or both key and value)."]
    errors.update(memory_content_errors(text=text, key=key, value=value))
    if valid_from and valid_to and valid_to <= valid_from:
        errors["valid_to"] = ["valid_to must be after valid_from."]
    if expires_at is not None:
        if tier not in Memory.SHORT_TERM_TIERS:
            errors["expires_at"] = ["Only working and episodic memories expire."]
        elif expires_at <= timezone.now():
            errors["expires_at"] = ["expires_at is in the past."]
    if conversation is not None and owner is not None and conversation.agent_id != owner.pk:
        errors["conversation"] = [f"Agent {owner_label or owner} has no conversation {conversation.pk}."]
    return text, errors


def memory_written_audit(
    *, actor: Principal, memory: Memory, status: str, route: str, sources: int, data: dict | None = None
) -> None:
    """The `memory.written` event of a new memory, in one shape for every writer (the write
    service, the distiller, Dreaming): its hash, version, status, route, tier, run and turn,
    what it supersedes, how many sources, plus the writer's `data`."""
    audit_record(
        "memory.written",
        actor=actor,
        store=memory.store,
        owner=memory.owner.name,
        object_type="memory",
        object_ids=[memory.pk],
        data={
            "content_hash": memory.content_hash,
            "version": memory.version,
            "status": status,
            "route": route,
            "tier": memory.tier,
            "run_id": memory.run_id,
            "turn": memory.turn,
            "event_id": memory.event_id,
            "supersedes": memory.supersedes_id,
            "sources": sources,
            **(data or {}),
        },
        revisions=[("memory", memory.pk, None, snapshot(memory))],
    )


@dataclass(frozen=True)
class WriteRequest:
    """One new memory as a writer asks for it, whatever the route (the API and MCP, the
    distiller, skills, an import, Dreaming): the owner and store it goes into, its text and
    fields, the sources it cites, what it supersedes, and how it is recorded — its author where
    not the actor (`author_kind`, `author_name`), what `attach` sets on the row (a skill overlay's
    `skill` and `position`, a precomputed `embedding`), `audit_data` added to its memory.written
    event and `version_reason`, its first version's reason. Who writes it and by which route are
    memory_write's arguments."""

    owner: Agent
    store: str
    text: str = ""
    sources: Sequence[dict] = ()
    tier: str = Memory.SEMANTIC
    category: str = ""
    key: str = ""
    value: Any = None
    confidence: float = 1.0
    supersedes: Memory | None = None
    valid_from: datetime.datetime | None = None
    valid_to: datetime.datetime | None = None
    expires_at: datetime.datetime | None = None
    run_id: str = ""
    turn: int | None = None
    event_id: str = ""
    conversation: Conversation | None = None
    author_kind: str = ""
    author_name: str = ""
    attach: dict | None = None
    audit_data: dict | None = None
    version_reason: str = ""


# the request's fields a new row takes as they are (memory_row_for_write)
_ROW_FIELDS = (
    "category",
    "key",
    "value",
    "confidence",
    "supersedes",
    "valid_from",
    "valid_to",
    "run_id",
    "turn",
    "event_id",
    "conversation",
)


def memory_write_check(*, actor: Principal, request: WriteRequest) -> WriteRequest:
    """The checks a new memory passes before anything is written, whoever writes it (memory_write,
    and memory_write_many for each of its memories before the first is stored): the actor may write
    there, the fields' rules, the memory it supersedes and the sources it cites. Raises Refused or
    Invalid; returns the request with the text to store (derived from key and value when none is
    given)."""
    access.check_write(actor, owner=request.owner, store=request.store)
    text, errors = _write_rules(
        owner=request.owner,
        text=request.text,
        key=request.key,
        value=request.value,
        tier=request.tier,
        valid_from=request.valid_from,
        valid_to=request.valid_to,
        expires_at=request.expires_at,
        conversation=request.conversation,
    )
    if errors:
        raise Invalid(errors)
    _check_references(
        actor=actor, owner=request.owner, supersedes=request.supersedes, sources=list(request.sources)
    )
    return replace(request, text=text)


def state_write_check(
    *, owner: Agent, supersedes: Memory | None, expires_at: datetime.datetime | None, now: datetime.datetime
) -> None:
    """State is scratch, nothing more: a state write (route AGENT_STATE, active without review)
    may supersede only a state item of the same agent (its own working memory in its own store)
    and expires within the working TTL. Raises Invalid naming the field otherwise."""
    errors = {}
    if supersedes is not None and (
        not is_own_scratch(supersedes, owner.pk) or supersedes.status not in Memory.LIVE
    ):
        errors["supersedes"] = [
            "A state write supersedes only the agent's own state (working memory in its own store); "
            "write without state to replace a fact, and a reviewer will decide."
        ]
    if expires_at is not None and expires_at > now + working_ttl():
        errors["expires_at"] = [
            f"State expires within {settings.BRAIN_SHORT_TERM_TTL_HOURS} hours (the working TTL)."
        ]
    if errors:
        raise Invalid(errors)


def duplicate_answers(
    *, actor: Principal, supersedes: Memory | None, attach: dict | None, route: str = API_WRITE
) -> bool:
    """Whether an exact duplicate answers this write: an agent (or an import into an agent's
    memory) repeating what a live memory already says gets that memory back, never stored twice
    (the answer carries `duplicate_of`). A write that supersedes or attaches to something is its
    own."""
    return (actor.is_agent or route == IMPORT) and supersedes is None and not attach


def duplicate_corroborate(*, actor: Principal, memory: Memory, sources: list[dict]) -> Memory:
    """The answer to an exact duplicate write: the live memory that already says it, with
    `duplicate_of` set. The sources the write cites that the memory lacks are added to it
    (fingerprinted now) and audited as `memory.sources_added`, in one transaction, so its
    provenance keeps every source that stated the fact and stays supported when one of them
    changes. The writer may read the memory: it lies in the store the writer writes into."""
    added = []
    if sources:
        with transaction.atomic():
            locked = memory_lock(memory.pk)
            added = memory_sources_add(locked, sources)
            if added:
                audit_record(
                    "memory.sources_added",
                    actor=actor,
                    store=locked.store,
                    owner=locked.owner.name,
                    object_type="memory",
                    object_ids=[locked.pk],
                    reason="an exact duplicate write cited them",
                    counts={"sources": len(added)},
                    data={"sources": [f"{row.kind}:{row.ref}" for row in added]},
                )
        if added:
            memory = Memory.objects.select_related("owner").prefetch_related("sources").get(pk=memory.pk)
    memory.duplicate_of = memory.pk
    return memory


def memory_row_for_write(*, actor: Principal, request: WriteRequest, now: datetime.datetime) -> Memory:
    """The new, unsaved, queued row of a checked write request, as memory_activate expects it:
    authored by the actor unless the request names another author; a short-term memory expires
    after BRAIN_SHORT_TERM_TTL hours unless the request gives `expires_at`."""
    expires_at = request.expires_at
    if request.tier in Memory.SHORT_TERM_TIERS and expires_at is None:
        expires_at = now + working_ttl()
    kind, name = _author_of(actor)
    return memory_row_new(
        owner=request.owner,
        store=request.store,
        text=request.text,
        author_kind=request.author_kind or kind,
        author_name=request.author_name or name,
        status=Memory.QUEUED,
        queue_reason=QUEUE_NEW,
        tier=request.tier,
        expires_at=expires_at,
        **{name: getattr(request, name) for name in _ROW_FIELDS},
        **(request.attach or {}),
    )


def memory_write(
    *,
    actor: Principal,
    request: WriteRequest,
    route: str = API_WRITE,
    now: datetime.datetime | None = None,
    refused_stays_queued: bool = False,
) -> Memory:
    """Write the memory `request` asks for (owned by its `owner`, in its `store`) by `route` and
    pass it through memory_activate: it comes back `queued` (awaiting review) or `active`.
    Short-term tiers get `expires_at` (default TTL BRAIN_SHORT_TERM_TTL hours). Raises Refused
    when `actor` may not write there and MemoryConflict (after auditing memory.policy_violation)
    when strict anti-drift refuses it; then nothing is written. With `refused_stays_queued` (the
    distiller: a proposal is never lost) a memory strict anti-drift refuses is stored queued, its
    status reason naming what it contradicts, instead of refused."""
    request = memory_write_check(actor=actor, request=request)
    owner, store, supersedes = request.owner, request.store, request.supersedes
    sources = list(request.sources)
    if route == AGENT_STATE:
        state_write_check(
            owner=owner, supersedes=supersedes, expires_at=request.expires_at, now=now or timezone.now()
        )
    if duplicate_answers(actor=actor, supersedes=supersedes, attach=request.attach, route=route):
        existing = exact_duplicate_for_write(
            owner=owner,
            store=store,
            tier=request.tier,
            text=request.text,
            key=request.key,
            value=request.value,
        )
        if existing is not None:
            return duplicate_corroborate(actor=actor, memory=existing, sources=sources)
    now = now or timezone.now()
    memory = memory_row_for_write(actor=actor, request=request, now=now)
    try:
        with transaction.atomic():
            [status] = activate(
                actor=actor,
                route=route,
                rows=[NewRow(memory, None, sources, request.version_reason)],
                now=now,
                decide=_held_when_refused(actor=actor, route=route, now=now)
                if refused_stays_queued
                else None,
            )
            if (
                route == API_WRITE
                and status in Memory.LIVE
                and not memory.key
                and memory.tier != Memory.WORKING
            ):
                # a trusted write that contradicts active memories stays active; the relation
                # finder marks the pairs in the background (contradictions_mark_later: a sweep),
                # which also puts a queued write's undecided pairs to the model, if there is one;
                # working memory is scratch, not a claim to weigh
                transaction.on_commit(contradictions_mark_later)
            memory_written_audit(
                actor=actor,
                memory=memory,
                status=status,
                route=route,
                sources=len(sources),
                data=request.audit_data,
            )
    except MemoryConflict as exc:
        policy_violation_record(
            actor=actor,
            owner=owner,
            store=store,
            memory_id=None,
            content_hash=Memory.hash_content(request.text, request.key, request.value),
            route=route,
            conflicts=exc.conflicts_with,
        )
        raise
    memory.source_list = [{"kind": s["kind"], "ref": s["ref"]} for s in _unique_sources(sources)]
    return memory


def _held_when_refused(*, actor: Principal, route: str, now: datetime.datetime):
    """The decision of a write whose refusal is kept (the distiller: a proposal is never lost):
    memory_activate's, or, where strict anti-drift refuses it, queued as it is, saying why."""

    def decide(memory: Memory) -> Activation:
        try:
            return memory_activate(actor=actor, memory=memory, route=route, now=now)
        except MemoryConflict as exc:
            return Activation.held(status_reason=f"contradicts active memories {exc.conflicts_with}")

    return decide


def _check_references(*, actor: Principal, owner: Agent, supersedes: Memory | None, sources: list[dict]):
    """A writer may supersede only a live memory it can read, in a store it may write into, and
    cite only sources it can read (`access.check_sources`, every kind). Unknown and invisible ids
    get the same answer (400)."""
    errors = {}
    if supersedes is not None:
        visible = access.can_read_store(actor, owner=supersedes.owner, store=supersedes.store)
        if not visible:
            errors["supersedes"] = [f"There is no memory {supersedes.pk} you can see."]
        elif supersedes.status not in Memory.LIVE:
            errors["supersedes"] = [
                f"Memory {supersedes.pk} is {supersedes.status}; it cannot be superseded."
            ]
        else:
            try:
                access.check_write(actor, owner=owner, store=supersedes.store)
            except Refused:
                errors["supersedes"] = [f"You may not write into the store of memory {supersedes.pk}."]
    try:
        access.check_sources(actor, sources)
    except Invalid as exc:
        errors.update(exc.fields)
    if errors:
        raise Invalid(errors)


def _unique_sources(sources):
    seen = set()
    for source in sources:
        pair = (source["kind"], source["ref"])
        if pair not in seen:
            seen.add(pair)
            yield source
