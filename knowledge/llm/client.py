"""The one governor every model call goes through: resolve the profile, refuse when it is not
configured or over its (or the agent's) daily budget or when the prompt and the reply budget do
not fit the profile's context window (no request the server must refuse), call the
chat-completions endpoint with a timeout and bounded retries (never after a timeout: the server
may still be computing the first), send the job's schema as structured output (`wire.py`), read
`finish_reason` (a reply cut at its budget is `cut`, not "not JSON"), validate the reply against
the job's schema, write one `brain.model` log line and a ModelUsage row for every call and
refusal. `model_ask` is what jobs use: one call, and at most one repair (see there).

Call it outside your write transaction: the usage row must survive your rollback, and a slow
model must not hold row locks. Callers write nothing unless model_call returned; every failure
raises a ModelError whose `reason` says, for people, why the model could not be used."""

import contextlib
import functools
import json
import logging
import re
import ssl
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import httpx
import jsonschema
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from knowledge.llm.profiles import budget_refusal, endpoint_record, profile_resolve
from knowledge.llm.slots import NoFreeSlot, endpoint_slot
from knowledge.llm.stream import post_streamed
from knowledge.llm.wire import FALLBACK, response_format, strip_nulls
from knowledge.models import Agent, ModelUsage
from knowledge.tokens import count_tokens

RETRY_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}
LOCK_NAMESPACE = 7007  # pg advisory lock namespace for budget reservations
MAX_BACKOFF_SECONDS = 30.0
# Chat templates add a few tokens per message (role markers) and per request.
MESSAGE_OVERHEAD, REQUEST_OVERHEAD = 8, 16
# What a real tokenizer may count more than knowledge.tokens (which errs high for English but
# not for every text): prompts are fitted with this margin.
ESTIMATE_MARGIN = 1.1
log = logging.getLogger("brain.model")


class ModelError(Exception):
    """The model could not give a usable answer; nothing should be written."""

    outcome = ModelUsage.ERROR

    def __init__(self, reason: str, *, usage_id: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.usage_id = usage_id
        self.usage_ids = [usage_id] if usage_id is not None else []  # model_ask: every call made
        self.repaired = ""


class ModelUnavailable(ModelError):
    """Not configured, disabled, over budget, or failing (timeouts, HTTP errors)."""


class ModelUnreachable(ModelUnavailable):
    """The server did not answer usefully (no connection, a timeout, a 5xx or 429 after the
    retries): an outage. A job defers and asks again with the same input once the endpoint
    answers; it does not shrink its input nor count the attempt against it."""


class ModelOutputInvalid(ModelError):
    """The endpoint answered, but not with output that validates against the schema."""

    outcome = ModelUsage.INVALID

    def __init__(self, reason: str, *, usage_id: int | None = None, text: str = ""):
        super().__init__(reason, usage_id=usage_id)
        self.text = text


class ModelReplyCut(ModelOutputInvalid):
    """The reply stopped at its token budget (finish_reason "length"): a cut reply, not a bad one."""

    outcome = ModelUsage.CUT


class ModelPromptTooLong(ModelUnavailable):
    """The prompt and the reply budget do not fit the profile's context window; nothing was sent."""

    def __init__(self, reason: str, *, usage_id=None, context: int = 0, prompt: int = 0):
        super().__init__(reason, usage_id=usage_id)
        self.context, self.prompt = context, prompt


@dataclass
class ModelReply:
    text: str
    data: Any  # the validated JSON when a schema was given, else None
    usage_id: int
    profile: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    usage_ids: list = field(default_factory=list)  # every call that made this reply (a repair adds one)
    repaired: str = ""  # what the repair was for, when there was one
    schema_sent: str = ""  # json_schema | json_object | ""


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's own default context (certifi's bundle, or SSL_CERT_FILE / SSL_CERT_DIR), built
    once per process: building one loads the CA bundle, about 0.1 s of CPU that every call paid
    again when each client made its own (measured in the stage A benchmark: 28 calls, 2.7 s)."""
    return httpx.create_ssl_context()


def estimate_tokens(text: str) -> int:
    """The token estimate used to reserve budget before a call (and when an endpoint reports no
    usage): the one token counter, knowledge.tokens.count_tokens. The endpoint's own usage
    figures replace it afterwards."""
    return max(1, count_tokens(text))


def _actor_label(actor) -> str:
    if actor is None:
        return "system:system"
    if isinstance(actor, str):
        return actor
    return f"{actor.kind_label}:{actor.name}"


def _lock_key(text: str) -> int:
    return zlib.crc32(text.encode()) & 0x7FFFFFFF


def _reserve(profile, agent, *, actor: str, purpose: str, estimate: int, refuse: str = "") -> tuple[int, str]:
    """Check both budgets and reserve one call with a pending usage row, atomically with respect
    to other workers (advisory locks, always taken profile first, then agent). Returns
    (usage id, refusal reason); a refusal is recorded as a `refused` row that costs nothing."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_NAMESPACE, _lock_key("p:" + profile.name)]
            )
            if agent is not None:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_NAMESPACE, _lock_key(f"a:{agent.pk}")]
                )
        refusal = refuse or budget_refusal(profile, agent, estimate=estimate)
        usage = ModelUsage.objects.create(
            created_at=timezone.now(),
            profile=profile.name,
            model=profile.model,
            agent=agent,
            actor=actor,
            purpose=purpose,
            outcome=ModelUsage.REFUSED if refusal else ModelUsage.PENDING,
            total_tokens=0 if refusal else estimate,
            error=refusal,
        )
    return usage.pk, refusal


def _finish(usage_id: int, **fields) -> None:
    fields["error"] = (fields.get("error") or "")[:1000]
    ModelUsage.objects.filter(pk=usage_id).update(**fields)


FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def parse_structured(text: str, schema: dict) -> Any:
    """Parse model output as JSON (tolerating a ``` fence), drop the nulls the wire schema
    allowed for optional properties, and validate it against `schema`. Raises ValueError with a
    short, human reason."""
    match = FENCE.match(text or "")
    raw = match.group(1) if match else (text or "")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        # Some of json's messages end in "at" ("Unterminated string starting at"): no second one.
        where = "character" if exc.msg.endswith(" at") else "at character"
        raise ValueError(f"output is not JSON ({exc.msg} {where} {exc.pos})")
    data = strip_nulls(data, schema)
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise ValueError(f"output does not match the schema at {where}: {error.message[:300]}")
    return data


def prompt_estimate(messages: list[dict]) -> int:
    """The prompt's tokens as fitted to a context window: the one token counter, the chat
    template's overhead, and a margin for tokenizers that count more."""
    counted = sum(count_tokens(str(m.get("content", ""))) + MESSAGE_OVERHEAD for m in messages)
    return int((counted + REQUEST_OVERHEAD) * ESTIMATE_MARGIN) + 1


def context_tokens(profile: str | None = None, *, agent: Agent | None = None) -> int:
    """The context window (prompt + reply tokens) of a profile: its setting, else what its
    server's /v1/models reported, else BRAIN_MODEL_CONTEXT_TOKENS."""
    return profile_resolve(profile, agent=agent).context_tokens


def prompt_room(profile: str | None = None, *, reply_tokens: int, agent: Agent | None = None) -> int:
    """How many prompt tokens (as `prompt_estimate` counts them) fit beside a reply budget."""
    return context_tokens(profile, agent=agent) - reply_tokens


CONTEXT_RE = re.compile(
    r"maximum context length is (\d+)|context (?:length|size|window)[^0-9]{0,40}(\d+)", re.I
)
SCHEMA_REFUSAL_RE = re.compile(r"response_format|json_schema|schema|grammar", re.I)


def _log(
    *,
    purpose,
    profile,
    model,
    outcome,
    prompt_tokens=0,
    completion_tokens=0,
    ms=0,
    attempts=0,
    usage=None,
    waited_ms=0,
):
    """One line per call, never the prompt or the reply (a failure at warning level). `ms` is the
    call's own time; `waited_ms` the time it waited for a free slot of the endpoint before."""
    (log.info if outcome == ModelUsage.OK else log.warning)(
        "job=%s profile=%s model=%s prompt_tokens=%s completion_tokens=%s ms=%s waited_ms=%s attempts=%s "
        "outcome=%s usage=%s",
        purpose,
        profile,
        model or "-",
        prompt_tokens,
        completion_tokens,
        ms,
        waited_ms,
        attempts,
        outcome,
        usage if usage is not None else "-",
    )


def model_call(
    *,
    purpose: str,
    messages: list[dict],
    schema: dict | None = None,
    profile: str | None = None,
    agent: Agent | None = None,
    actor=None,
    max_tokens: int = 1024,
    temperature: float = 0.0,
) -> ModelReply:
    """Make one governed chat-completions call and return its reply (validated against `schema`
    when one is given). Raises ModelUnavailable (ModelPromptTooLong when it does not fit the
    context: nothing sent), ModelOutputInvalid (ModelReplyCut for a reply stopped at its budget);
    either way a usage row and a log line say what happened, and the caller must write nothing.
    The stages: admit (configured, fits the context, within budget), build the request, send it
    (the endpoint's slot, bounded retries), read the answer, judge the reply."""
    if agent is not None:  # budgets and the profile as they are now, not as the caller loaded them
        agent = Agent.objects.get(pk=agent.pk)
    resolved = profile_resolve(profile, agent=agent)
    fitted = prompt_estimate(messages)
    usage_id = _admit(
        resolved,
        agent,
        actor=_actor_label(actor),
        purpose=purpose,
        messages=messages,
        fitted=fitted,
        max_tokens=max_tokens,
    )
    request = _request(
        resolved,
        purpose=purpose,
        messages=messages,
        schema=schema,
        max_tokens=max_tokens,
        temperature=temperature,
    )
    sent = _send(resolved, request, usage_id=usage_id)
    logged = dict(
        purpose=purpose,
        profile=resolved.name,
        model=resolved.model,
        ms=sent.latency_ms,
        attempts=sent.attempts,
        waited_ms=sent.waited_ms,
    )
    choice, text = _answer(sent, usage_id=usage_id, logged=logged)
    usage = sent.payload.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or fitted)  # a stream may not say
    completion_tokens = int(usage.get("completion_tokens") or estimate_tokens(text))
    spent = dict(
        attempts=sent.attempts,
        latency_ms=sent.latency_ms,
        waited_ms=sent.waited_ms,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=int(usage.get("total_tokens") or prompt_tokens + completion_tokens),
    )
    logged.update(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, usage=usage_id)
    if choice.get("finish_reason") == "length":
        _cut(resolved, text, usage, max_tokens=max_tokens, usage_id=usage_id, spent=spent, logged=logged)
    data = None if schema is None else _validated(text, schema, usage_id=usage_id, spent=spent, logged=logged)
    _finish(usage_id, outcome=ModelUsage.OK, **spent)
    _log(outcome=ModelUsage.OK, **logged)
    return ModelReply(
        text=text,
        data=data,
        usage_id=usage_id,
        profile=resolved.name,
        model=resolved.model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        usage_ids=[usage_id],
        schema_sent=request.structured,
    )


def _admit(
    resolved, agent, *, actor: str, purpose: str, messages: list[dict], fitted: int, max_tokens: int
) -> int:
    """The governor's word before anything is sent: the profile is configured, the prompt
    (`fitted` tokens) and the reply budget fit its context, and both budgets have room. Returns
    the usage row reserved for the call; raises ModelUnavailable (ModelPromptTooLong) otherwise,
    the refusal logged and, past the first check, recorded."""
    if resolved.missing:
        _log(purpose=purpose, profile=resolved.name, model=resolved.model, outcome="unconfigured")
        raise ModelUnavailable(resolved.missing)
    if fitted + max_tokens > resolved.context_tokens:
        reason = (
            f"too long for the model: the prompt (about {fitted} tokens) and the reply budget "
            f"({max_tokens}) exceed profile {resolved.name}'s context of {resolved.context_tokens} tokens"
        )
        usage_id, _ = _reserve(resolved, agent, actor=actor, purpose=purpose, estimate=0, refuse=reason)
        _log(purpose=purpose, profile=resolved.name, model=resolved.model, outcome="too_long", usage=usage_id)
        raise ModelPromptTooLong(reason, usage_id=usage_id, context=resolved.context_tokens, prompt=fitted)
    estimate = estimate_tokens(json.dumps(messages, ensure_ascii=False)) + max_tokens
    usage_id, refusal = _reserve(resolved, agent, actor=actor, purpose=purpose, estimate=estimate)
    if refusal:
        _log(purpose=purpose, profile=resolved.name, model=resolved.model, outcome="refused", usage=usage_id)
        raise ModelUnavailable(refusal, usage_id=usage_id)
    return usage_id


@dataclass
class _Request:
    """A chat-completions request as sent: `structured` is the form of structured output it
    asks for ("" without a schema), which a server that refuses it moves down (`_reshaped`)."""

    purpose: str
    url: str
    headers: dict
    body: dict
    schema: dict | None
    structured: str


def _request(
    resolved, *, purpose: str, messages: list[dict], schema: dict | None, max_tokens: int, temperature: float
) -> _Request:
    """The request for the profile's endpoint, with the job's schema as structured output."""
    structured = resolved.structured_output if schema is not None else ""
    body = {"model": resolved.model, "messages": messages, "temperature": temperature}
    body[settings.BRAIN_MODEL_TOKEN_FIELD or "max_tokens"] = max_tokens
    if schema is not None:
        body["response_format"] = response_format(purpose, schema, structured)
    headers = {"Content-Type": "application/json"}
    if resolved.api_key:
        headers["Authorization"] = f"Bearer {resolved.api_key}"
    return _Request(purpose, f"{resolved.base_url}/chat/completions", headers, body, schema, structured)


@dataclass
class _Sent:
    """What sending came to: the answer's JSON (`payload`, None when there was none) or the
    outcome and error that say why; `outage` while no answer said anything about the request."""

    payload: dict | None = None
    outcome: str = ModelUsage.ERROR
    error: str = ""
    outage: bool = True
    attempts: int = 0
    latency_ms: int = 0
    waited_ms: int = 0


_DONE, _RETRY, _RESHAPED = "done", "retry", "reshaped"  # what follows one attempt


def _send(resolved, request: _Request, *, usage_id: int) -> _Sent:
    """Send `request` holding one of the endpoint's slots (none free: ModelUnreachable, recorded),
    with up to max_retries retries of an error worth retrying, backing off between them; a
    request reshaped for the server's structured output is asked again at once."""
    slot = contextlib.ExitStack()  # the endpoint's slot, held until the call has its answer
    try:
        waited = slot.enter_context(endpoint_slot(resolved.base_url))
    except NoFreeSlot as exc:
        _finish(usage_id, outcome=ModelUsage.ERROR, total_tokens=0, error=str(exc))
        _log(
            purpose=request.purpose,
            profile=resolved.name,
            model=resolved.model,
            outcome="busy",
            usage=usage_id,
        )
        raise ModelUnreachable(str(exc), usage_id=usage_id)
    sent = _Sent(waited_ms=int(waited * 1000))
    backoff = settings.BRAIN_MODEL_RETRY_BACKOFF_SECONDS
    started = time.monotonic()  # the call's own time and timeout start once it has a slot
    with slot, httpx.Client(timeout=httpx.Timeout(resolved.timeout_seconds), verify=_tls_context()) as client:
        attempt = 0
        while attempt <= resolved.max_retries:
            sent.attempts += 1
            then, retry_after = _attempt(client, resolved, request, sent)
            if then == _DONE:
                break
            if then == _RESHAPED:
                continue
            if attempt < resolved.max_retries and backoff > 0:
                time.sleep(min(max(backoff * 2**attempt, retry_after), MAX_BACKOFF_SECONDS))
            attempt += 1
    sent.latency_ms = int((time.monotonic() - started) * 1000)
    return sent


def _attempt(client: httpx.Client, resolved, request: _Request, sent: _Sent) -> tuple[str, float]:
    """One POST of `request`, what it came to recorded in `sent`. Returns what follows (done,
    retry, reshaped) and the seconds the server asked to wait before a retry."""
    streamed = None
    try:
        if settings.BRAIN_MODEL_STREAM:  # a call given up on is closed, and the server stops
            response, streamed = post_streamed(
                client,
                request.url,
                body=request.body,
                headers=request.headers,
                seconds=resolved.timeout_seconds,
            )
        else:
            response = client.post(request.url, json=request.body, headers=request.headers)
    except httpx.TimeoutException:
        # No second request: the server may still be computing the first (it would do
        # the work twice). The job's own retry (a sweep, a back-off) asks again later.
        sent.outcome, sent.error = ModelUsage.TIMEOUT, f"no answer within {resolved.timeout_seconds:g} s"
        return _DONE, 0.0
    except httpx.HTTPError as exc:
        sent.outcome, sent.error = ModelUsage.ERROR, f"cannot reach the endpoint: {type(exc).__name__}: {exc}"
        return _RETRY, 0.0
    if response.status_code == 200:
        try:
            sent.payload = streamed if streamed is not None else response.json()
        except ValueError:
            sent.outcome, sent.error = ModelUsage.ERROR, "the endpoint answered with a body that is not JSON"
        return _DONE, 0.0
    sent.outcome = ModelUsage.ERROR
    sent.error = f"HTTP {response.status_code}: {response.text[:300]}"
    sent.outage = response.status_code >= 500 or response.status_code in (408, 429)
    if _reshaped(resolved, request, response):
        return _RESHAPED, 0.0
    if response.status_code == 400 and (match := CONTEXT_RE.search(response.text)):
        found = int(match.group(1) or match.group(2))
        if 256 <= found < resolved.context_tokens:
            endpoint_record(resolved, context_tokens=found)
    if response.status_code not in RETRY_STATUSES:
        return _DONE, 0.0
    try:
        return _RETRY, float(response.headers.get("Retry-After", "0"))
    except ValueError:
        return _RETRY, 0.0


def _reshaped(resolved, request: _Request, response: httpx.Response) -> bool:
    """Whether the server refused this form of structured output, and the request now asks the
    next form: found out once, kept, and this call asked again the next way (a different
    request, not a repeat): json_schema → json_object with a schema → json_object."""
    if not (
        response.status_code in (400, 422, 500)
        and request.structured in FALLBACK
        and resolved.structured_setting == "auto"
        and SCHEMA_REFUSAL_RE.search(response.text)
        and not CONTEXT_RE.search(response.text)
    ):
        return False
    refused, request.structured = request.structured, FALLBACK[request.structured]
    request.body["response_format"] = response_format(request.purpose, request.schema, request.structured)
    endpoint_record(
        resolved,
        structured_output=request.structured,
        structured_note=f"{refused} refused ({timezone.now():%Y-%m-%d %H:%M} UTC): {response.text[:200]}",
    )
    return True


def _answer(sent: _Sent, *, usage_id: int, logged: dict) -> tuple[dict, str]:
    """The answer's first choice and its text; with none (no answer, or one without
    choices[0].message.content) the call fails, recorded: ModelUnreachable while it was an
    outage, else ModelUnavailable."""
    timing = dict(attempts=sent.attempts, latency_ms=sent.latency_ms, waited_ms=sent.waited_ms)
    if sent.payload is None:
        reason = f"failing: {sent.error}" + (
            f" (after {sent.attempts} attempts)" if sent.attempts > 1 else ""
        )
        _finish(usage_id, outcome=sent.outcome, total_tokens=0, error=reason, **timing)
        _log(outcome=sent.outcome, usage=usage_id, **logged)
        raise (ModelUnreachable if sent.outage else ModelUnavailable)(reason, usage_id=usage_id)
    try:
        choice = sent.payload["choices"][0]
        text = choice["message"]["content"]
        if not isinstance(text, str):
            raise TypeError
    except (KeyError, IndexError, TypeError):
        reason = "the endpoint's answer has no choices[0].message.content"
        _finish(usage_id, outcome=ModelUsage.ERROR, error=reason, **timing)
        _log(outcome=ModelUsage.ERROR, usage=usage_id, **logged)
        raise ModelUnavailable(f"failing: {reason}", usage_id=usage_id)
    return choice, text


def _cut(resolved, text: str, usage: dict, *, max_tokens: int, usage_id: int, spent: dict, logged: dict):
    """A reply stopped at its budget (finish_reason length): recorded as cut, ModelReplyCut."""
    completion_tokens = spent["completion_tokens"]
    reason = f"the reply was cut off at its budget of {max_tokens} tokens (finish_reason length)"
    if usage.get("completion_tokens") and completion_tokens < max_tokens:
        # The server trimmed the budget to what its context had left (llama-cpp-python does,
        # silently): say the budget it used, and its context is the prompt and that budget.
        reason = (
            f"the reply was cut off after {completion_tokens} tokens: the server trimmed the "
            f"budget of {max_tokens} to fit its context (finish_reason length)"
        )
        found = spent["prompt_tokens"] + completion_tokens
        if 256 <= found < resolved.context_tokens:
            endpoint_record(resolved, context_tokens=found)
    _finish(usage_id, outcome=ModelUsage.CUT, error=reason, **spent)
    _log(outcome=ModelUsage.CUT, **logged)
    raise ModelReplyCut(f"cut reply: {reason}", usage_id=usage_id, text=text)


def _validated(text: str, schema: dict, *, usage_id: int, spent: dict, logged: dict) -> Any:
    """The reply's JSON, validated against the job's schema; else recorded as invalid,
    ModelOutputInvalid."""
    try:
        return parse_structured(text, schema)
    except ValueError as exc:
        _finish(usage_id, outcome=ModelUsage.INVALID, error=str(exc), **spent)
        _log(outcome=ModelUsage.INVALID, **logged)
        raise ModelOutputInvalid(f"invalid model output: {exc}", usage_id=usage_id, text=text)


def reply_budget(want: int, profile: str | None = None, *, agent: Agent | None = None) -> int:
    """A job's reply budget on this profile: what it wants, but never more than half the
    context window (the other half is the prompt's)."""
    return max(1, min(want, context_tokens(profile, agent=agent) // 2))


def fits(
    messages: list[dict], reply_tokens: int, profile: str | None = None, *, agent: Agent | None = None
) -> bool:
    """Whether the prompt and its reply budget fit the profile's context window."""
    return prompt_estimate(messages) + reply_tokens <= context_tokens(profile, agent=agent)


def echoes_example(text: str, examples) -> bool:
    """Whether a reply's text is one of its prompt's example placeholders, verbatim (case, <>,
    quotes and punctuation ignored), or punctuation alone ("..."): a model that copies "<the
    merged statement>" said nothing."""

    def fold(value: str) -> str:
        return " ".join(re.sub(r"[<>\"'.…:]", " ", value or "").lower().split())

    folded = fold(text)
    return not folded or any(folded == fold(e) for e in examples)  # only punctuation says nothing
