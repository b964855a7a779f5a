"""A job's model call, repaired rather than repeated (`model_ask`): one governed call
(client.model_call) and at most one more, fitted to the context like the first."""

import hashlib
import json

from knowledge.llm.client import (
    ModelError,
    ModelOutputInvalid,
    ModelPromptTooLong,
    ModelReply,
    ModelReplyCut,
    context_tokens,
    model_call,
    prompt_estimate,
    reply_budget,
)
from knowledge.llm.profiles import profile_resolve
from knowledge.models import Agent, ModelUsage

REPAIR_REPLY_CHARS = 2000  # how much of a refused reply is quoted back
REPAIR_TEMPERATURE = 0.4  # the one repair or retry of a job's call: not the first call's greedy reply


def usage_mark_invalid(usage_id: int, reason: str) -> None:
    """A reply that passed the schema but not the job's code rules: its usage row says so."""
    ModelUsage.objects.filter(pk=usage_id).update(outcome=ModelUsage.INVALID, error=reason[:1000])


def _fingerprint(messages: list[dict], max_tokens: int) -> str:
    raw = json.dumps([messages, max_tokens], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


def repair_messages(
    messages: list[dict], reply_text: str, reason: str, *, quote: int = REPAIR_REPLY_CHARS
) -> list[dict]:
    """The conversation that asks for a repair: the refused reply (its first `quote` characters)
    and why it was refused."""
    quoted = (reply_text or "").strip()[:quote]
    return [
        *messages,
        {"role": "assistant", "content": quoted or "(empty)"},
        {
            "role": "user",
            "content": f"That reply was refused: {reason[:500]}. Correct it and reply again with the "
            "whole JSON only, following every rule above.",
        },
    ]


def repair_fitted(
    messages: list[dict], reply_text: str, reason: str, *, max_tokens: int, context: int, shrink=None
) -> list[dict] | None:
    """The repair request fitted to the context like the first: the refused reply quoted in
    full, or in part, or not at all, over the job's input or, when even that does not fit, the
    smaller input `shrink()` returns; None when nothing fits."""
    for base in (messages, None):
        if base is None:
            base = shrink() if shrink is not None else None
            if not base or base == messages:
                return None
        for quote in (REPAIR_REPLY_CHARS, REPAIR_REPLY_CHARS // 4, 0):
            asked = repair_messages(base, reply_text, reason, quote=quote)
            if prompt_estimate(asked) + max_tokens <= context:
                return asked
    return None


def _finishes_in_time(usage_id: int, tokens: int, timeout: float) -> bool:
    """Whether a reply of `tokens` tokens would finish within `timeout` at the speed the cut
    call was generated (its completion tokens over its own time); unknown speed: no."""
    spent = ModelUsage.objects.filter(pk=usage_id).values("completion_tokens", "latency_ms").first()
    if not spent or not spent["completion_tokens"]:
        return False
    per_second = spent["completion_tokens"] / (max(spent["latency_ms"], 1) / 1000)
    return tokens / per_second <= timeout * 0.8


def model_ask(
    *,
    purpose: str,
    messages: list[dict],
    schema: dict,
    max_tokens: int,
    check=None,
    shrink=None,
    profile: str | None = None,
    agent: Agent | None = None,
    actor=None,
) -> ModelReply:
    """A job's model call, repaired rather than repeated. One call; then at most one more, sent
    at REPAIR_TEMPERATURE (at temperature 0 a small model answers a repair with the same reply):
    - a cut reply (finish_reason "length") is asked again with the smaller input `shrink()`
      returns (new messages, or None) and the same budget; only a job without a smaller input
      gets twice the budget, and only where the context has room and the cut call's speed says
      it would finish within the profile's timeout;
    - a reply that fails the schema or `check(data)` (the job's code rules: a reason, or "") is
      asked again with the refused reply and the reason quoted back, fitted to the context like
      the first (`repair_fitted`);
    - a prompt that does not fit the context is built again smaller by `shrink()`.
    A request identical to one already sent is never sent again. Raises the last ModelError
    (with every usage id in `usage_ids`); returns the reply with `usage_ids` and `repaired`."""
    sent: set[str] = set()
    usage_ids: list[int] = []
    repaired = ""

    def call(msgs, tokens, temperature=0.0):
        sent.add(_fingerprint(msgs, tokens))
        try:
            return model_call(
                purpose=purpose,
                messages=msgs,
                schema=schema,
                profile=profile,
                agent=agent,
                actor=actor,
                max_tokens=tokens,
                temperature=temperature,
            )
        except ModelError as exc:
            if exc.usage_id is not None:
                usage_ids.append(exc.usage_id)
            raise

    def fail(exc: ModelError):
        exc.usage_ids = list(usage_ids)
        exc.repaired = repaired
        raise exc

    def repair(text: str, why: str):
        asked = repair_fitted(
            messages,
            text,
            why,
            max_tokens=max_tokens,
            context=context_tokens(profile, agent=agent),
            shrink=shrink,
        )
        return (asked, max_tokens) if asked else None

    next_try = None
    try:
        reply = call(messages, max_tokens)
        usage_ids.append(reply.usage_id)
        why = check(reply.data) if check else ""
        if not why:
            reply.usage_ids = usage_ids
            return reply
        usage_mark_invalid(reply.usage_id, why)
        repaired = f"invalid: {why}"
        next_try = repair(reply.text, why)
        first_error = ModelOutputInvalid(f"invalid model output: {why}", usage_id=reply.usage_id)
    except ModelReplyCut as exc:
        repaired, first_error = "cut", exc
        # Twice the budget, but within the context beside the prompt and never past half of it
        # (reply_budget: the other half is the prompt's, whatever this prompt happens to need).
        room = context_tokens(profile, agent=agent) - prompt_estimate(messages)
        bigger = min(reply_budget(max_tokens * 2, profile, agent=agent), room)
        if shrink is not None and (smaller := shrink()):
            next_try = (smaller, max_tokens)
        elif bigger >= max_tokens * 3 // 2 and _finishes_in_time(  # a little more room would be cut again
            exc.usage_id, bigger, profile_resolve(profile, agent=agent).timeout_seconds
        ):
            next_try = (messages, bigger)
    except ModelPromptTooLong as exc:
        repaired, first_error = "too long", exc
        if shrink is not None and (smaller := shrink()):
            next_try = (smaller, max_tokens)
    except ModelOutputInvalid as exc:
        repaired, first_error = f"invalid: {exc.reason}", exc
        next_try = repair(exc.text, exc.reason.removeprefix("invalid model output: "))
    except ModelError as exc:
        fail(exc)
    if next_try is None or _fingerprint(*next_try) in sent:
        fail(first_error)
    try:
        reply = call(*next_try, temperature=REPAIR_TEMPERATURE)
    except ModelOutputInvalid as exc:
        fail(exc)
    except ModelError as exc:  # the repair could not be made: the first failure is what to tell
        first_error.reason = f"{first_error.reason}; asked again, but that call failed: {exc.reason}"
        fail(first_error)
    usage_ids.append(reply.usage_id)
    why = check(reply.data) if check else ""
    if why:
        usage_mark_invalid(reply.usage_id, why)
        fail(ModelOutputInvalid(f"invalid model output: {why}", usage_id=reply.usage_id))
    reply.usage_ids, reply.repaired = usage_ids, repaired
    return reply
