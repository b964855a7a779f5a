"""The `history` section of a compiled context: a conversation's last turns verbatim and the
rolling summary of the turns before them.

A turn is one message of the conversation's channel and thread that the conversation may read
(`RecallScope.message_q`), in (ts, id) order. Each compilation folds the turns that have left
the verbatim window since the last fold into the stored summary (`ConversationSummary`), with
the light model when it is available and extractively otherwise, so the work per compilation is
the new turns only. A fold takes at most FOLD_MAX turns: when more have piled up (a long channel
read for the first time) the older ones are counted as left out, not read.

Budget: the section takes at most BRAIN_HISTORY_BUDGET_TOKENS of what remains after the
instructions, memo and skills. The verbatim turns come first, newest first, each cut to half
of that; the summary gets what is left, at most BRAIN_HISTORY_SUMMARY_TOKENS."""

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from knowledge.llm import LIGHT, ModelError, model_availability, model_call
from knowledge.models import Message
from knowledge.principals.principal import Principal
from knowledge.tokens import count_tokens, truncate_to_tokens
from memory.history import summary as job
from memory.history.models import ConversationSummary

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
    stored = summary_advance(scope, messages, boundary=recent[0] if recent else None)

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


def summary_advance(scope, messages, *, boundary: Message | None) -> ConversationSummary | None:
    """Fold the turns between the stored summary's cursor and `boundary` (the oldest verbatim
    turn) into the summary and store it. Returns the summary as stored (None when there is none
    and nothing to fold). The model is called outside any transaction; the write locks the row
    and keeps a fold another compilation stored meanwhile."""
    conversation = scope.conversation
    stored = ConversationSummary.objects.filter(conversation=conversation).first()
    if boundary is None:
        return stored
    gap = messages.filter(_before(boundary.ts, boundary.pk))
    if stored is not None and stored.through_ts is not None:
        gap = gap.filter(_after(stored.through_ts, stored.through_message))
    new = list(gap.order_by("-ts", "-id")[: FOLD_MAX + 1])[::-1]
    if not new:
        return stored
    skipped = 0
    if len(new) > FOLD_MAX:
        skipped = gap.count() - FOLD_MAX
        new = new[-FOLD_MAX:]
    previous = stored.text if stored is not None else ""
    limit = settings.BRAIN_HISTORY_SUMMARY_TOKENS
    text, method, note, usage = _fold(scope.agent, previous, [_turn(m) for m in new], limit)
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


def _fold(agent, previous: str, turns: list[tuple[str, str]], limit: int):
    """(text, method, note, model usage id): the model's fold when it is available and its
    reply passes the schema and the rules, else the extractive fold and why."""
    why = model_availability(LIGHT, agent=agent)
    if not why:
        try:
            reply = model_call(
                purpose="history.summary",
                messages=job.prompt(previous=previous, turns=turns, limit=limit),
                schema=job.SCHEMA,
                profile=LIGHT,
                agent=agent,
                actor=ACTOR,
                max_tokens=limit * 2 + 50,
            )
        except ModelError as exc:
            why = f"the model call failed: {exc}"
        else:
            why = job.check(reply.data, previous=previous, turns=turns, limit=limit)
            if not why:
                return reply.data["summary"].strip(), ConversationSummary.MODEL, "", reply.usage_id
            why = f"the model's reply was refused: {why}"
    text = job.extractive_fold(previous, turns, limit=limit)
    return text, ConversationSummary.EXTRACTIVE, why, None
