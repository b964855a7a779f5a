"""The distiller: when a conversation finishes, the light model reads it and proposes one
memory per thing learnt (facts about a person, procedures, workspace notes, preferences,
lessons), each with the conversation as its source, into the conversation's write store.

A conversation is distilled once (DistillerRun, claimed with a conditional update). The model
is called outside any transaction; its output is validated against OUTPUT_SCHEMA before
anything is written, and invalid output writes nothing (the usage row records why)."""

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from curation.models import DistillerRun
from knowledge.audit.services import audit_record
from knowledge.llm import (
    LIGHT,
    ModelError,
    defer_later,
    deferral_pending,
    deferrals_waiting,
    deferred_reason,
    echoes_example,
    fits,
    model_ask,
    outage,
    reply_budget,
)
from knowledge.memories.rows import memory_row_state
from knowledge.models import Conversation, Memory, Message
from knowledge.principal import Principal
from memory.lifecycle.activation import memory_activate_stored
from memory.lifecycle.activation_hooks import DISTILLER
from memory.lifecycle.conflicts import MemoryConflict
from memory.lifecycle.write import WriteRequest, memory_write

ACTOR = Principal.system("distiller")
STUCK_AFTER = timedelta(minutes=30)
TRANSCRIPT_CHARS = 60_000  # the newest part of a very long conversation
REPLY_TOKENS = 2000
VERSION = "distiller/2"
TASK = "curation.tasks.distill_conversation"

CATEGORIES = {
    "person_fact": (Memory.SEMANTIC, "a fact about a person (who they are, what they need, how they work)"),
    "procedure": (Memory.PROCEDURAL, "how to do something, a step that worked"),
    "workspace_note": (Memory.SEMANTIC, "something true for the whole workspace (systems, policies, owners)"),
    "preference": (Memory.SEMANTIC, "how someone wants things done"),
    "lesson": (Memory.SEMANTIC, "what went wrong or right and what to do next time"),
}
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "memories": {
            "type": "array",
            "maxItems": 20,
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": 2000, "pattern": r"\S"},
                    "category": {"enum": list(CATEGORIES)},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "key": {"type": "string", "maxLength": 200},
                },
                "required": ["text", "category"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["memories"],
    "additionalProperties": False,
}
SYSTEM = (
    "You are the memory distiller of the AI agent {agent}. Read the finished conversation below and "
    "write down what is worth remembering in future conversations, one memory per thing learnt. "
    "Categories: {categories}. Each memory must stand on its own (name the person or system), state "
    "only what the conversation says, and must not record temporary state, one-off errors, guesses "
    "or small talk. If nothing is worth remembering, return an empty list. Reply with JSON: "
    '{{"memories": [{{"text": "<the memory>", "category": "<one of the categories>", "confidence": '
    "<0.0 to 1.0>}}]}}. Each line of the conversation starts with its time (UTC): resolve words like "
    '"yesterday" or "next Friday" to dates.'
)
EXAMPLES = ("...", "<the memory>", "the memory")


TRANSCRIPT_MESSAGES = 200


def conversation_transcript(conversation: Conversation) -> list[dict]:
    """The conversation's messages, oldest first, as {"speaker", "text", "at"}: the messages of
    its channel (and thread, if it has one) dated while it was open — or, when messages were
    imported with older timestamps, the latest ones up to its end. At most TRANSCRIPT_MESSAGES."""
    messages = Message.objects.filter(channel_id=conversation.channel_id)
    if conversation.thread:
        messages = messages.filter(thread=conversation.thread)
    end = conversation.finished_at or timezone.now()
    during = messages.filter(ts__gte=conversation.started_at, ts__lte=end)
    chosen = during if during.exists() else messages.filter(ts__lte=end)
    rows = list(chosen.order_by("-ts", "-id")[:TRANSCRIPT_MESSAGES].values("speaker_name", "text", "ts"))
    return [
        {"speaker": r["speaker_name"], "text": r["text"], "at": r["ts"].isoformat()} for r in reversed(rows)
    ]


def distilled_activate(memory: Memory) -> str:
    """Pass a stored, queued distilled memory through the one activation function again (route
    distiller), as `memory_write` does for a new one: it stays queued for review, or goes into
    force when distiller auto-activation (BRAIN_DISTILLER_AUTO_ACTIVATE) is on and the gate lets
    it. A memory that strict anti-drift refuses stays queued with the reason."""
    try:
        with transaction.atomic():
            return memory_activate_stored(actor=ACTOR, memory=memory, route=DISTILLER)
    except MemoryConflict as exc:
        memory_row_state(memory, status_reason=f"contradicts active memories {exc.conflicts_with}")
        return Memory.QUEUED


def _claim(conversation: Conversation) -> DistillerRun | None:
    run, _ = DistillerRun.objects.get_or_create(conversation=conversation)
    now = timezone.now()
    claimed = (
        DistillerRun.objects.filter(pk=run.pk, attempts__lt=DistillerRun.MAX_ATTEMPTS)
        .filter(
            Q(state__in=[DistillerRun.PENDING, DistillerRun.FAILED])
            | Q(state=DistillerRun.RUNNING, started_at__lt=now - STUCK_AFTER)
        )
        .update(state=DistillerRun.RUNNING, attempts=F("attempts") + 1, started_at=now, reason="")
    )
    return DistillerRun.objects.get(pk=run.pk) if claimed else None


def _finish(run: DistillerRun, state: str, reason: str = "", usage_id=None, memory_ids=()) -> DistillerRun:
    run.state, run.reason, run.finished_at = state, reason[:2000], timezone.now()
    run.usage_id = usage_id if usage_id is not None else run.usage_id
    run.memory_ids = list(memory_ids)
    run.save(update_fields=["state", "reason", "finished_at", "usage_id", "memory_ids"])
    return run


def _defer(run: DistillerRun, reason: str, *, deferrals: int, usage_id=None) -> DistillerRun:
    """An outage: the run waits (pending) with the same input and its attempt not counted, and
    comes back by itself after the back-off of its next deferral (knowledge.llm.outage; the sweep
    leaves it to that); an outage never fails a conversation."""
    DistillerRun.objects.filter(pk=run.pk).update(attempts=F("attempts") - 1)
    run.refresh_from_db(fields=["attempts"])
    what = f"distil conversation {run.conversation_id}"
    at = deferral_pending(TASK, what=what) or defer_later(
        TASK, run.conversation_id, deferrals=deferrals + 1, what=what
    )
    note = f"{deferred_reason(reason)}; again from {at:%Y-%m-%d %H:%M:%S} UTC"
    return _finish(run, DistillerRun.PENDING, note, usage_id=usage_id)


def _stamp(at) -> str:
    if isinstance(at, str):  # conversation_transcript gives ISO strings
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            return ""
    return f"[{at:%Y-%m-%d %H:%M}] " if hasattr(at, "strftime") else ""


def _prompt(conversation: Conversation, transcript: list[dict]) -> list[dict]:
    lines = [
        f"{_stamp(message.get('at'))}{message.get('speaker', '?')}: {message.get('text', '')}"
        for message in transcript
    ]
    text = "\n".join(lines)[-TRANSCRIPT_CHARS:]
    categories = "; ".join(f"{name} = {help}" for name, (_, help) in CATEGORIES.items())
    where = conversation.channel.name + (f" (thread {conversation.thread})" if conversation.thread else "")
    return [
        {"role": "system", "content": SYSTEM.format(agent=conversation.agent.name, categories=categories)},
        {"role": "user", "content": f"Conversation in {where}:\n{text}"},
    ]


def _fitted(conversation: Conversation, transcript: list[dict], reply_tokens: int) -> list[dict]:
    """The newest part of the transcript whose prompt fits the light model's context beside the
    reply budget (the oldest messages go first; at least one is kept)."""
    while len(transcript) > 1 and not fits(
        _prompt(conversation, transcript), reply_tokens, LIGHT, agent=conversation.agent
    ):
        transcript = transcript[len(transcript) // 4 or 1 :]
    return transcript


def rule_breach(data: dict) -> str:
    """Code rules beyond the schema ("" when the reply passes)."""
    for n, proposal in enumerate(data["memories"], 1):
        if echoes_example(proposal["text"], EXAMPLES):
            return f"memory {n} is the prompt's example text ({proposal['text']!r}), not a memory"
    return ""


def distill_conversation(conversation_id: int, *, deferrals: int = 0) -> DistillerRun | None:
    """Distil one finished conversation (idempotent: once done, never again). Returns its run,
    or None when there is nothing to do (unknown, not finished, already done or running).
    `deferrals`: outages in a row so far (a run deferred by one that came back)."""
    conversation = Conversation.objects.select_related("agent", "channel").filter(pk=conversation_id).first()
    if conversation is None or conversation.status != Conversation.FINISHED:
        return None
    run = _claim(conversation)
    if run is None:
        return None
    transcript = conversation_transcript(conversation)
    if not transcript:
        return _finish(run, DistillerRun.SKIPPED, "nothing to read: the conversation has no messages")
    down = outage(profile=LIGHT, agent=conversation.agent)
    if down:  # Status already knows: no call, and the attempt does not count
        return _defer(run, down, deferrals=deferrals)
    reply_tokens = reply_budget(REPLY_TOKENS, LIGHT, agent=conversation.agent)
    read = _fitted(conversation, transcript, reply_tokens)
    if run.attempts > 1 and len(read) > 1:
        # A retry after a failure reads the newer half (a quarter …): the sweep never sends the
        # request that already failed again. (An outage is not a failure of the request: it
        # defers the run without counting, so the next try sends the same input.)
        read = read[len(read) - max(len(read) >> (run.attempts - 1), 1) :]

    def shrink():  # a cut reply: the newer half of what was read, once
        nonlocal read
        if len(read) <= 1:
            return None
        read = read[len(read) // 2 :]
        return _prompt(conversation, read)

    try:
        reply = model_ask(
            purpose="distill",
            messages=_prompt(conversation, read),
            schema=OUTPUT_SCHEMA,
            profile=LIGHT,
            agent=conversation.agent,
            actor=ACTOR,
            max_tokens=reply_tokens,
            check=rule_breach,
            shrink=shrink,
        )
    except ModelError as exc:
        if outage(exc):
            return _defer(run, exc.reason, deferrals=deferrals, usage_id=exc.usage_id)
        return _finish(run, DistillerRun.FAILED, exc.reason, usage_id=exc.usage_id)
    note = ""
    if len(read) < len(transcript):
        note = f"read the newest {len(read)} of {len(transcript)} messages (the light model's context)"
    return _write(run, conversation, reply.data["memories"], usage_id=reply.usage_id, note=note)


def _write(run, conversation, proposals: list[dict], *, usage_id, note: str = "") -> DistillerRun:
    source = [{"kind": "conversation", "ref": str(conversation.pk)}]
    with transaction.atomic():
        run = DistillerRun.objects.select_for_update().get(pk=run.pk)
        if run.state != DistillerRun.RUNNING:  # someone else finished it meanwhile
            return run
        seen, created = set(), []
        for proposal in proposals:
            text = " ".join(proposal["text"].split())
            if not text or text.casefold() in seen:
                continue
            seen.add(text.casefold())
            tier, _ = CATEGORIES[proposal["category"]]
            # the write service, route distiller: queued for review, or in force where distiller
            # auto-activation is on and the activation checks let it; one that strict anti-drift
            # refuses stays queued with the reason
            memory = memory_write(
                actor=ACTOR,
                request=WriteRequest(
                    owner=conversation.agent,
                    store=conversation.write_store,
                    text=text,
                    sources=source,
                    tier=tier,
                    category=proposal["category"],
                    key=proposal.get("key", ""),
                    confidence=proposal.get("confidence", 0.8),
                    conversation=conversation,
                    author_kind="distiller",
                    author_name="distiller",
                    audit_data={"conversation": conversation.pk, "author": "distiller"},
                    version_reason=f"distilled from conversation {conversation.pk}",
                ),
                route=DISTILLER,
                refused_stays_queued=True,
            )
            created.append(memory)
        audit_record(
            "conversation.distilled",
            actor=ACTOR,
            store=conversation.write_store,
            owner=conversation.agent.name,
            object_type="conversation",
            object_ids=[conversation.pk],
            counts={"memories": len(created), "proposed": len(proposals)},
            data={"memories": [m.pk for m in created], "statuses": sorted({m.status for m in created})},
        )
        return _finish(run, DistillerRun.DONE, note, usage_id=usage_id, memory_ids=[m.pk for m in created])


def distill_enqueue(conversation: Conversation) -> None:
    """Distil a conversation in the background once the current transaction commits."""
    from django_q.tasks import async_task

    transaction.on_commit(lambda: async_task("curation.tasks.distill_conversation", conversation.pk))


def distill_pending(limit: int = 20) -> int:
    """Distil finished conversations the worker missed (no run yet, one deferred by an outage
    whose deferral was lost, or a failed attempt left). A run whose deferral waits is left to it,
    so it is not asked for before its back-off, nor twice."""
    waiting = [args[0] for args in deferrals_waiting(TASK)]
    ids = list(
        Conversation.objects.filter(status=Conversation.FINISHED)
        .exclude(pk__in=waiting)
        .filter(
            Q(distiller_run__isnull=True)
            | Q(distiller_run__state=DistillerRun.PENDING)
            | Q(
                distiller_run__state=DistillerRun.FAILED,
                distiller_run__attempts__lt=DistillerRun.MAX_ATTEMPTS,
            )
        )
        .order_by("finished_at", "id")
        .values_list("id", flat=True)[:limit]
    )
    done = 0
    for conversation_id in ids:
        if distill_conversation(conversation_id) is not None:
            done += 1
    return done
