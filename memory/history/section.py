"""The `history` section of a compiled context: a conversation's last turns verbatim and the
rolling summary of the turns before them.

A turn is one message of the conversation's channel and thread that the conversation may read
(`RecallScope.message_q`), in (ts, id) order. The turns that have left the verbatim window since
the last fold are folded into the stored summary (`ConversationSummary`): with the light model
in the background (`tasks.summary_fold`, queued by the compilation, which meanwhile shows the
stored summary with an extractive line per newer turn, unstored), or — no model available —
extractively at once, so no request waits on a model and the work per compilation is the new
turns only. An outage is not "no model" (knowledge.llm.outage): while the model server does not
answer, a compilation shows the newer turns extractively without storing them, and the
background fold writes nothing and defers itself (`summary_fold_defer`), folding the same turns
with the model once the server answers; while that deferral waits, compilations queue no
second fold. A fold takes at most FOLD_MAX turns: when more have piled up (a long channel read
for the first time) the older ones are counted as left out, not read. The model reads them in
batches that fit its context.

Budget: the section takes at most BRAIN_HISTORY_BUDGET_TOKENS of what remains after the
instructions, memo and skills. The verbatim turns come first, newest first, each cut to half
of that; the summary gets what is left, at most BRAIN_HISTORY_SUMMARY_TOKENS."""

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q

from knowledge.llm import (
    LIGHT,
    ModelError,
    defer_later,
    deferral_pending,
    fits,
    model_ask,
    model_availability,
    outage,
    reply_budget,
)
from knowledge.models import Message
from knowledge.principal import Principal
from knowledge.tokens import count_tokens, truncate_to_tokens
from memory.history import summary as job
from memory.models import ConversationSummary

DEFAULT_TURNS = 4
MAX_TURNS = 50
FOLD_MAX = 200
ACTOR = Principal.system("history summary")
SUMMARY_HEADER = "Earlier in this conversation:"
RECENT_HEADER = "Recent turns:"


def _empty(note: str = "") -> dict:
    return {"name": "history", "text": "", "tokens": 0, "turns": [], "summary": None, "note": note}


# (ts, id) comparisons, with the plain ts bound first so the (channel, thread, ts) index gives
# the range.
def _after(ts, pk) -> Q:
    return Q(ts__gte=ts) & (Q(ts__gt=ts) | Q(ts=ts, pk__gt=pk))


def _before(ts, pk) -> Q:
    return Q(ts__lte=ts) & (Q(ts__lt=ts) | Q(ts=ts, pk__lt=pk))


def _turn(message: Message) -> tuple[str, str]:
    return message.speaker_name, message.text


def history_section(scope, *, budget: int, turns: int = DEFAULT_TURNS) -> dict:
    """The history section for `scope`'s conversation within `budget` tokens (see the module)."""
    conversation = scope.conversation
    if turns <= 0:
        return _empty("history_turns is 0")
    if conversation.pk is None:
        return _empty("no conversation: history is kept per conversation")
    budget = min(budget, settings.BRAIN_HISTORY_BUDGET_TOKENS)
    messages = Message.objects.filter(
        scope.message_q, channel_id=conversation.channel_id, thread=conversation.thread
    ).only("pk", "ts", "speaker_name", "text")
    recent = list(messages.order_by("-ts", "-id")[:turns])[::-1]
    boundary = recent[0] if recent else None
    # an outage: the turns wait for the model (shown, not stored); no model at all: folded now
    if model_availability(LIGHT, agent=scope.agent) and not outage(profile=LIGHT, agent=scope.agent):
        stored = summary_advance(
            messages, conversation=conversation, agent=scope.agent, boundary=boundary, model=False
        )
    else:
        stored = summary_pending(scope, messages, boundary=boundary)

    parts, shown, used = [], [], 0
    cap = max(budget // 2, 1)
    header = count_tokens(RECENT_HEADER)
    for message in reversed(recent):  # newest first, so the latest turn is never the one left out
        line = f"[{message.speaker_name} · {message.ts:%Y-%m-%d %H:%M}] {message.text}"
        text = truncate_to_tokens(line, cap)
        tokens = count_tokens(text)
        if not text or used + tokens + header > budget:
            break
        parts.insert(0, text)
        shown.insert(
            0,
            {
                "id": message.pk,
                "speaker": message.speaker_name,
                "ts": message.ts,
                "tokens": tokens,
                "truncated": text != line,
            },
        )
        used += tokens
    recent_text = "\n".join([RECENT_HEADER, *parts]) if parts else ""
    used = count_tokens(recent_text)

    summary_out = None
    summary_text = ""
    if stored is not None and stored.text:
        room = min(budget - used - count_tokens(SUMMARY_HEADER), settings.BRAIN_HISTORY_SUMMARY_TOKENS)
        body = truncate_to_tokens(stored.text, room)
        if body:
            summary_text = f"{SUMMARY_HEADER}\n{body}"
        summary_out = {
            "text": body,
            "tokens": count_tokens(body),
            "truncated": body != stored.text,
            "turns": stored.turns,
            "skipped": stored.skipped,
            "through_message": stored.through_message,
            "method": stored.method,
            "version": stored.version,
            "note": stored.note,
            "updated_at": stored.updated_at,
        }
    text = "\n\n".join(t for t in (summary_text, recent_text) if t)
    tokens = count_tokens(text)
    assert tokens <= budget, (tokens, budget)
    return {
        "name": "history",
        "text": text,
        "tokens": tokens,
        "turns": shown,
        "summary": summary_out,
        "note": "",
    }


def _gap(messages, stored, boundary):
    """The turns to fold (at most FOLD_MAX, oldest first) and how many older ones are skipped."""
    gap = messages.filter(_before(boundary.ts, boundary.pk))
    if stored is not None and stored.through_ts is not None:
        gap = gap.filter(_after(stored.through_ts, stored.through_message))
    new = list(gap.order_by("-ts", "-id")[: FOLD_MAX + 1])[::-1]
    skipped = 0
    if len(new) > FOLD_MAX:
        skipped = gap.count() - FOLD_MAX
        new = new[-FOLD_MAX:]
    return new, skipped


def _stored_and_gap(conversation, messages, boundary: Message | None):
    """The stored summary and the turns not folded into it yet (none without a boundary)."""
    stored = ConversationSummary.objects.filter(conversation=conversation).first()
    if boundary is None:
        return stored, [], 0
    new, skipped = _gap(messages, stored, boundary)
    return stored, new, skipped


QUEUED_KEY = "history-fold:{}"
QUEUED_SECONDS = 300  # one queued fold per conversation at a time (a fold is idempotent anyway)
FOLD_TASK = "memory.history.tasks.summary_fold"


class FoldDeferred(Exception):
    """The model server does not answer (an outage): the fold writes nothing and waits."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _deferral_name(conversation_id: int) -> str:
    return f"history fold of conversation {conversation_id}"


def summary_fold_enqueue(conversation_id: int, boundary_id: int) -> None:
    """Queue the background fold (memory.history.tasks.summary_fold) once the current
    transaction commits, unless one is already queued or a deferred one waits for the model
    server (that one folds the turns when it answers)."""
    if deferral_pending(FOLD_TASK, what=_deferral_name(conversation_id)):
        return
    if not cache.add(QUEUED_KEY.format(conversation_id), boundary_id, QUEUED_SECONDS):
        return
    from django_q.tasks import async_task

    transaction.on_commit(lambda: async_task(FOLD_TASK, conversation_id, boundary_id))


def summary_fold_defer(conversation_id: int, boundary_id: int, *, deferrals: int):
    """Ask for the fold again after the back-off of its next deferral (knowledge.llm.outage);
    once: while one waits no second is asked for. Returns when it runs."""
    name = _deferral_name(conversation_id)
    return deferral_pending(FOLD_TASK, what=name) or defer_later(
        FOLD_TASK, conversation_id, boundary_id, deferrals=deferrals + 1, what=name
    )


def summary_pending(scope, messages, *, boundary: Message | None) -> ConversationSummary | None:
    """What a compilation shows while the model folds in the background: the stored summary
    with one extractive line per newer turn (not stored), and the fold queued."""
    conversation = scope.conversation
    stored, new, skipped = _stored_and_gap(conversation, messages, boundary)
    if not new:
        return stored
    summary_fold_enqueue(conversation.pk, boundary.pk)
    previous = stored.text if stored is not None else ""
    shown = ConversationSummary(
        conversation=conversation,
        text=job.extractive_fold(
            previous, [_turn(m) for m in new], limit=settings.BRAIN_HISTORY_SUMMARY_TOKENS
        ),
        turns=(stored.turns if stored else 0) + len(new),
        skipped=(stored.skipped if stored else 0) + skipped,
        through_ts=new[-1].ts,
        through_message=new[-1].pk,
        method=ConversationSummary.EXTRACTIVE,
        version=job.VERSION,
        note=f"{len(new)} newer turn(s) shown extractively while the model folds them in the background",
    )
    shown.updated_at = stored.updated_at if stored else None
    return shown


def summary_advance(
    messages, *, conversation, agent, boundary: Message | None, model: bool = True
) -> ConversationSummary | None:
    """Fold the turns of `messages` (what `agent` may read of `conversation`) between the stored
    summary's cursor and `boundary` (the oldest verbatim turn) into the summary and store it —
    with the light model when `model` and it is available (the background fold), else
    extractively. Returns the summary as stored (None when there is
    none and nothing to fold). The model is called outside any transaction; the write locks the
    row and keeps a fold another compilation stored meanwhile. Raises FoldDeferred, writing
    nothing, when the model server does not answer."""
    stored, new, skipped = _stored_and_gap(conversation, messages, boundary)
    if not new:
        return stored
    previous = stored.text if stored is not None else ""
    limit = settings.BRAIN_HISTORY_SUMMARY_TOKENS
    if model:
        text, method, note, usage = _fold(agent, previous, [_turn(m) for m in new], limit)
    else:
        why = model_availability(LIGHT, agent=agent)
        text, method, note, usage = (
            job.extractive_fold(previous, [_turn(m) for m in new], limit=limit),
            ConversationSummary.EXTRACTIVE,
            why,
            None,
        )
    last = new[-1]
    with transaction.atomic():
        row, _ = ConversationSummary.objects.select_for_update().get_or_create(conversation=conversation)
        if (row.through_ts, row.through_message) != (
            (stored.through_ts, stored.through_message) if stored is not None else (None, None)
        ):
            return row  # another compilation folded meanwhile; its summary stands
        row.text, row.tokens = text, count_tokens(text)
        row.through_ts, row.through_message = last.ts, last.pk
        row.turns += len(new)
        row.skipped += skipped
        row.method, row.version, row.note, row.model_usage = method, job.VERSION, note[:300], usage
        row.save()
    return row


def _batches(agent, previous: str, turns: list[tuple[str, str]], limit: int, reply_tokens: int):
    """The turns cut into runs whose fold prompt fits the light model's context (the summary so
    far, at most `limit` tokens, is part of every prompt)."""
    out, current = [], []
    for turn in turns:
        trial = [*current, turn]
        if current and not fits(
            job.prompt(previous="x" * (limit * 4), turns=trial, limit=limit), reply_tokens, LIGHT, agent=agent
        ):
            out.append(current)
            current = [turn]
        else:
            current = trial
    return [*out, current] if current else out


def _fold(agent, previous: str, turns: list[tuple[str, str]], limit: int):
    """(text, method, note, model usage id): the model's fold when it is available and every
    batch's reply passes the schema and the rules, else the extractive fold and why. Raises
    FoldDeferred on an outage: no lesser, extractive fold is stored in its place."""
    down = outage(profile=LIGHT, agent=agent)
    if down:
        raise FoldDeferred(down)
    why = model_availability(LIGHT, agent=agent)
    if not why:
        reply_tokens = reply_budget(limit * 2 + 50, LIGHT, agent=agent)
        text, usage = previous, None
        try:
            for batch in _batches(agent, previous, turns, limit, reply_tokens):
                sources = [text, *(f"{s}: {t}" for s, t in batch)]
                reply = model_ask(
                    purpose="history.summary",
                    messages=job.prompt(previous=text, turns=batch, limit=limit),
                    schema=job.SCHEMA,
                    profile=LIGHT,
                    agent=agent,
                    actor=ACTOR,
                    max_tokens=reply_tokens,
                    check=lambda data, p=text, b=batch, src=sources: job.check(
                        data, previous=p, turns=b, limit=limit, sources=src
                    ),
                )
                text, usage = reply.data["summary"].strip(), reply.usage_id
        except ModelError as exc:
            if outage(exc):
                raise FoldDeferred(exc.reason) from None
            why = f"the model call failed: {exc}"
            if "invalid model output: " in str(exc):
                why = f"the model's reply was refused: {str(exc).split('invalid model output: ', 1)[1]}"
        else:
            return text, ConversationSummary.MODEL, "", usage
    text = job.extractive_fold(previous, turns, limit=limit)
    return text, ConversationSummary.EXTRACTIVE, why, None
