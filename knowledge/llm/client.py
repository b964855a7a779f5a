"""The one governor every model call goes through: resolve the profile, refuse when it is not
configured or over its (or the agent's) daily budget, call the chat-completions endpoint with a
timeout and bounded retries, validate structured output against a JSON schema, and record a
ModelUsage row for every call and refusal.

Call it outside your write transaction: the usage row must survive your rollback, and a slow
model must not hold row locks. Callers write nothing unless model_call returned; every failure
raises a ModelError whose `reason` says, for people, why the model could not be used."""

import functools
import json
import re
import ssl
import time
import zlib
from dataclasses import dataclass
from typing import Any

import httpx
import jsonschema
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from knowledge.llm.profiles import budget_refusal, profile_resolve
from knowledge.models import Agent, ModelUsage
from knowledge.tokens import count_tokens

RETRY_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}
LOCK_NAMESPACE = 7007  # pg advisory lock namespace for budget reservations
MAX_BACKOFF_SECONDS = 30.0


class ModelError(Exception):
    """The model could not give a usable answer; nothing should be written."""

    outcome = ModelUsage.ERROR

    def __init__(self, reason: str, *, usage_id: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.usage_id = usage_id


class ModelUnavailable(ModelError):
    """Not configured, disabled, over budget, or failing (timeouts, HTTP errors)."""


class ModelOutputInvalid(ModelError):
    """The endpoint answered, but not with output that validates against the schema."""

    outcome = ModelUsage.INVALID


@dataclass
class ModelReply:
    text: str
    data: Any  # the validated JSON when a schema was given, else None
    usage_id: int
    profile: str
    model: str
    prompt_tokens: int
    completion_tokens: int


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
    return f"{actor.kind}:{actor.name}"


def _lock_key(text: str) -> int:
    return zlib.crc32(text.encode()) & 0x7FFFFFFF


def _reserve(profile, agent, *, actor: str, purpose: str, estimate: int) -> tuple[int, str]:
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
        refusal = budget_refusal(profile, agent, estimate=estimate)
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
    """Parse model output as JSON (tolerating a ``` fence) and validate it against `schema`.
    Raises ValueError with a short, human reason."""
    match = FENCE.match(text or "")
    raw = match.group(1) if match else (text or "")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"output is not JSON ({exc.msg} at character {exc.pos})")
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise ValueError(f"output does not match the schema at {where}: {error.message[:300]}")
    return data


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
    when one is given). Raises ModelUnavailable or ModelOutputInvalid; either way a usage row
    says what happened, and the caller must write nothing."""
    if agent is not None:  # budgets and the profile as they are now, not as the caller loaded them
        agent = Agent.objects.get(pk=agent.pk)
    resolved = profile_resolve(profile, agent=agent)
    actor_label = _actor_label(actor)
    if resolved.missing:
        raise ModelUnavailable(resolved.missing)
    prompt_text = json.dumps(messages, ensure_ascii=False)
    estimate = estimate_tokens(prompt_text) + max_tokens
    usage_id, refusal = _reserve(resolved, agent, actor=actor_label, purpose=purpose, estimate=estimate)
    if refusal:
        raise ModelUnavailable(refusal, usage_id=usage_id)

    body = {
        "model": resolved.model,
        "messages": messages,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    if schema is not None:
        body["response_format"] = {"type": "json_object"}
    headers = {"Content-Type": "application/json"}
    if resolved.api_key:
        headers["Authorization"] = f"Bearer {resolved.api_key}"
    url = f"{resolved.base_url}/chat/completions"
    backoff = settings.BRAIN_MODEL_RETRY_BACKOFF_SECONDS
    started = time.monotonic()
    attempts, last_error, outcome = 0, "", ModelUsage.ERROR
    payload = None
    with httpx.Client(timeout=httpx.Timeout(resolved.timeout_seconds), verify=_tls_context()) as client:
        for attempt in range(resolved.max_retries + 1):
            attempts = attempt + 1
            retry_after = 0.0
            try:
                response = client.post(url, json=body, headers=headers)
            except httpx.TimeoutException:
                outcome, last_error = ModelUsage.TIMEOUT, f"no answer within {resolved.timeout_seconds:g} s"
            except httpx.HTTPError as exc:
                outcome, last_error = (
                    ModelUsage.ERROR,
                    f"cannot reach the endpoint: {type(exc).__name__}: {exc}",
                )
            else:
                if response.status_code == 200:
                    try:
                        payload = response.json()
                    except ValueError:
                        outcome, last_error = (
                            ModelUsage.ERROR,
                            "the endpoint answered with a body that is not JSON",
                        )
                    break
                outcome = ModelUsage.ERROR
                last_error = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in RETRY_STATUSES:
                    break
                try:
                    retry_after = float(response.headers.get("Retry-After", "0"))
                except ValueError:
                    retry_after = 0.0
            if attempt < resolved.max_retries and backoff > 0:
                time.sleep(min(max(backoff * 2**attempt, retry_after), MAX_BACKOFF_SECONDS))
    latency_ms = int((time.monotonic() - started) * 1000)

    if payload is None:
        reason = f"failing: {last_error}" + (f" (after {attempts} attempts)" if attempts > 1 else "")
        _finish(
            usage_id, outcome=outcome, attempts=attempts, latency_ms=latency_ms, total_tokens=0, error=reason
        )
        raise ModelUnavailable(reason, usage_id=usage_id)

    try:
        text = payload["choices"][0]["message"]["content"]
        if not isinstance(text, str):
            raise TypeError
    except (KeyError, IndexError, TypeError):
        reason = "the endpoint's answer has no choices[0].message.content"
        _finish(usage_id, outcome=ModelUsage.ERROR, attempts=attempts, latency_ms=latency_ms, error=reason)
        raise ModelUnavailable(f"failing: {reason}", usage_id=usage_id)
    usage = payload.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or estimate_tokens(prompt_text))
    completion_tokens = int(usage.get("completion_tokens") or estimate_tokens(text))
    spent = dict(
        attempts=attempts,
        latency_ms=latency_ms,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=int(usage.get("total_tokens") or prompt_tokens + completion_tokens),
    )
    data = None
    if schema is not None:
        try:
            data = parse_structured(text, schema)
        except ValueError as exc:
            _finish(usage_id, outcome=ModelUsage.INVALID, error=str(exc), **spent)
            raise ModelOutputInvalid(f"invalid model output: {exc}", usage_id=usage_id)
    _finish(usage_id, outcome=ModelUsage.OK, **spent)
    return ModelReply(
        text=text,
        data=data,
        usage_id=usage_id,
        profile=resolved.name,
        model=resolved.model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
