"""Model profiles: which endpoint, model and key a purpose uses, and how much of its daily
budget is left. The default profile comes from the environment; rows in ModelProfile add named
profiles (`light` for background work, one per agent for its answers) or override the default.
Blank fields of a row inherit from the environment default."""

import datetime
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from knowledge.audit.services import audit_record, snapshot
from knowledge.errors import Invalid
from knowledge.models import Agent, ModelEndpointState, ModelProfile, ModelUsage

DEFAULT, LIGHT = "default", "light"
BUILTIN = (DEFAULT, LIGHT)


@dataclass(frozen=True)
class Profile:
    """A profile with every inherited value filled in. `api_key` never leaves the server: use
    `public()` for anything shown or returned."""

    name: str
    base_url: str
    model: str
    api_key: str
    timeout_seconds: float
    max_retries: int
    daily_calls: int
    daily_tokens: int
    enabled: bool
    source: str  # environment | database
    missing: str = ""  # why it cannot be used as configured (empty: usable)
    context_tokens: int = 8192  # prompt + reply; see context_resolve
    structured_output: str = "json_schema"  # what is sent now: json_schema | json_object
    structured_setting: str = "auto"  # what was configured: auto | json_schema | json_object

    @property
    def configured(self) -> bool:
        return not self.missing

    def public(self) -> dict:
        return {
            "name": self.name,
            "base_url": self.base_url,
            "model": self.model,
            "api_key_set": bool(self.api_key),
            "timeout_seconds": self.timeout_seconds,
            "max_retries": self.max_retries,
            "daily_calls": self.daily_calls,
            "daily_tokens": self.daily_tokens,
            "enabled": self.enabled,
            "source": self.source,
            "context_tokens": self.context_tokens,
            "structured_output": self.structured_output,
        }


def _missing(name: str, base_url: str, model: str, enabled: bool) -> str:
    if not enabled:
        return f"disabled: profile {name} is switched off"
    blanks = [
        label
        for value, label in ((base_url, "base URL (BRAIN_MODEL_BASE_URL)"), (model, "model (BRAIN_MODEL)"))
        if not value
    ]
    if blanks:
        return f"not configured: profile {name} has no {' and no '.join(blanks)}"
    return ""


def profile_resolve(name: str | None = None, *, agent: Agent | None = None) -> Profile:
    """The profile `name`, or the agent's own profile, or the default. Never raises: an unknown
    or unconfigured profile comes back with `missing` saying why."""
    if not name:
        name = (agent.model_profile if agent is not None else "") or DEFAULT
    row = ModelProfile.objects.filter(name=name).first()
    env_model = settings.BRAIN_MODEL
    if name == LIGHT:
        env_model = settings.BRAIN_MODEL_LIGHT or settings.BRAIN_MODEL
    if row is None and name not in BUILTIN:
        return Profile(
            name=name,
            base_url="",
            model="",
            api_key="",
            timeout_seconds=settings.BRAIN_MODEL_TIMEOUT_SECONDS,
            max_retries=settings.BRAIN_MODEL_MAX_RETRIES,
            daily_calls=settings.BRAIN_MODEL_DAILY_CALLS,
            daily_tokens=settings.BRAIN_MODEL_DAILY_TOKENS,
            enabled=False,
            source="database",
            missing=f"no model profile named {name}",
        )
    base_url = (row.base_url if row and row.base_url else settings.BRAIN_MODEL_BASE_URL).rstrip("/")
    model = row.model if row and row.model else env_model
    enabled = row.enabled if row else True
    source = "database" if row else "environment"

    def pick(field, default):
        value = getattr(row, field) if row else None
        return default if value is None else value

    state = endpoint_state(name, base_url)
    setting = (row.structured_output if row and row.structured_output else "") or (
        settings.BRAIN_MODEL_STRUCTURED_OUTPUT
    )
    structured = setting if setting != "auto" else (state.structured_output if state else "") or "json_schema"
    context = (row.context_tokens if row else None) or (learned_context(state) if state else None)
    return Profile(
        context_tokens=int(context or settings.BRAIN_MODEL_CONTEXT_TOKENS),
        structured_output=structured,
        structured_setting=setting,
        name=name,
        base_url=base_url,
        model=model,
        api_key=row.api_key if row and row.api_key else settings.BRAIN_MODEL_API_KEY,
        timeout_seconds=float(pick("timeout_seconds", settings.BRAIN_MODEL_TIMEOUT_SECONDS)),
        max_retries=int(pick("max_retries", settings.BRAIN_MODEL_MAX_RETRIES)),
        daily_calls=int(pick("daily_calls", settings.BRAIN_MODEL_DAILY_CALLS)),
        daily_tokens=int(pick("daily_tokens", settings.BRAIN_MODEL_DAILY_TOKENS)),
        enabled=enabled,
        source=source,
        missing=_missing(name, base_url, model, enabled),
    )


# How long a context size learned from the server (its /v1/models, or a 400 naming it) holds.
# After that the profile falls back to its setting until the server says again, so a server
# restarted with a larger context is not held to the old one for good.
CONTEXT_TTL = datetime.timedelta(hours=1)


def learned_context(state: ModelEndpointState) -> int | None:
    """The context size learned about this endpoint, while it holds (CONTEXT_TTL)."""
    if state.context_tokens is None:
        return None
    if state.context_learned_at is not None and timezone.now() - state.context_learned_at > CONTEXT_TTL:
        return None
    return state.context_tokens


def endpoint_state(name: str, base_url: str) -> ModelEndpointState | None:
    """What was found out about this profile's endpoint (None when nothing was, or the profile
    now points somewhere else: the findings were about another server)."""
    state = ModelEndpointState.objects.filter(profile=name).first()
    if state is None or state.base_url != base_url:
        return None
    return state


def endpoint_record(profile: "Profile", **fields) -> None:
    """Keep a finding about a profile's endpoint (json_schema refused, its context, reachable)."""
    state, _ = ModelEndpointState.objects.get_or_create(profile=profile.name)
    if state.base_url != profile.base_url:  # findings about another server do not carry over
        state.structured_output, state.structured_note, state.context_tokens = "", "", None
        state.context_learned_at = None
        state.reachable, state.reach_error, state.checked_at = None, "", None
        state.base_url = profile.base_url
    if "context_tokens" in fields:
        fields.setdefault("context_learned_at", timezone.now())
    for key, value in fields.items():
        setattr(state, key, value)
    state.save()


def profile_names() -> list[str]:
    """Every profile worth showing: the built-in ones, stored rows and profiles agents name."""
    names = list(BUILTIN)
    for name in ModelProfile.objects.values_list("name", flat=True):
        if name not in names:
            names.append(name)
    for name in Agent.objects.exclude(model_profile="").values_list("model_profile", flat=True).distinct():
        if name not in names:
            names.append(name)
    return names


def day_start(now: datetime.datetime | None = None) -> datetime.datetime:
    """Budgets are per UTC day."""
    now = now or timezone.now()
    return now.astimezone(datetime.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _spent(qs, now=None) -> tuple[int, int]:
    row = qs.filter(created_at__gte=day_start(now), outcome__in=ModelUsage.SPENT).aggregate(
        calls=Count("id"), tokens=Sum("total_tokens")
    )
    return row["calls"] or 0, row["tokens"] or 0


def usage_today(*, profile: str | None = None, agent: Agent | None = None, now=None) -> tuple[int, int]:
    """(calls, tokens) spent today by a profile or by an agent (pending calls included)."""
    qs = ModelUsage.objects.all()
    if profile is not None:
        qs = qs.filter(profile=profile)
    if agent is not None:
        qs = qs.filter(agent=agent)
    return _spent(qs, now)


def agent_budget(agent: Agent) -> tuple[int, int]:
    calls = agent.model_daily_calls
    tokens = agent.model_daily_tokens
    return (
        settings.BRAIN_AGENT_DAILY_CALLS if calls is None else calls,
        settings.BRAIN_AGENT_DAILY_TOKENS if tokens is None else tokens,
    )


def budget_refusal(profile: Profile, agent: Agent | None, *, estimate: int, now=None) -> str:
    """Why a call estimated at `estimate` tokens may not be made now ("" when it may)."""
    calls, tokens = usage_today(profile=profile.name, now=now)
    if calls + 1 > profile.daily_calls:
        return f"over budget: profile {profile.name} made {calls} of {profile.daily_calls} calls today"
    if tokens + estimate > profile.daily_tokens:
        return (
            f"over budget: profile {profile.name} used {tokens} of {profile.daily_tokens} tokens today "
            f"(this call needs up to {estimate})"
        )
    if agent is not None:
        max_calls, max_tokens = agent_budget(agent)
        calls, tokens = usage_today(agent=agent, now=now)
        if calls + 1 > max_calls:
            return f"over budget: agent {agent.name} made {calls} of {max_calls} calls today"
        if tokens + estimate > max_tokens:
            return f"over budget: agent {agent.name} used {tokens} of {max_tokens} tokens today"
    return ""


def profile_status(profile: Profile, *, now=None) -> dict:
    """What the models page shows for one profile: its configuration (no secret), today's
    use against its budget, and why it is unavailable, if it is."""
    calls, tokens = usage_today(profile=profile.name, now=now)
    last = ModelUsage.objects.filter(profile=profile.name).exclude(outcome=ModelUsage.PENDING).first()
    unavailable = profile.missing
    if not unavailable and calls >= profile.daily_calls:
        unavailable = f"over budget: {calls} of {profile.daily_calls} calls today"
    if not unavailable and tokens >= profile.daily_tokens:
        unavailable = f"over budget: {tokens} of {profile.daily_tokens} tokens today"
    state = endpoint_state(profile.name, profile.base_url)
    if not unavailable and state is not None and state.reachable is False:
        unavailable = unreachable_reason(state)
    if not unavailable and last is not None and last.outcome in (ModelUsage.ERROR, ModelUsage.TIMEOUT):
        unavailable = f"failing: the last call ({last.created_at:%Y-%m-%d %H:%M} UTC) ended in {last.outcome}: {last.error}"
    return {
        **profile.public(),
        "configured": profile.configured,
        "calls_today": calls,
        "tokens_today": tokens,
        "unavailable": unavailable,
        "last_outcome": last.outcome if last else "",
        "reachable": None if state is None else state.reachable,
        "checked_at": None if state is None else state.checked_at,
        "structured_note": "" if state is None else state.structured_note,
    }


def unreachable_reason(state: ModelEndpointState) -> str:
    when = f" at {state.checked_at:%Y-%m-%d %H:%M} UTC" if state.checked_at else ""
    return f"unreachable: the endpoint did not answer the background check{when} ({state.reach_error})"


def endpoint_down(name: str | None = None, *, agent: Agent | None = None) -> str:
    """Why this profile's endpoint is down now, as the background check last found it ("" when
    it answered, or was never checked): a job defers instead of calling it."""
    profile = profile_resolve(name, agent=agent)
    if profile.missing:
        return ""
    state = endpoint_state(profile.name, profile.base_url)
    return unreachable_reason(state) if state is not None and state.reachable is False else ""


def model_availability(name: str | None = None, *, agent: Agent | None = None, now=None) -> str:
    """Why a call through this profile would not be made now ("" when it would be tried).
    Cheap: no network. Failures only show once a call has failed."""
    profile = profile_resolve(name, agent=agent)
    if profile.missing:
        return profile.missing
    state = endpoint_state(profile.name, profile.base_url)
    if state is not None and state.reachable is False:
        return unreachable_reason(state)
    return budget_refusal(profile, agent, estimate=1, now=now)


def recent_usage(*, limit: int = 50, outcome: str = "", profile: str = ""):
    qs = ModelUsage.objects.select_related("agent")
    if outcome:
        qs = qs.filter(outcome=outcome)
    if profile:
        qs = qs.filter(profile=profile)
    return qs[:limit]


def agents_usage_today(now=None) -> list[dict]:
    since = day_start(now)
    spent = Q(model_usage__created_at__gte=since, model_usage__outcome__in=ModelUsage.SPENT)
    rows = Agent.objects.annotate(
        calls_today=Count("model_usage", filter=spent),
        tokens_today=Sum("model_usage__total_tokens", filter=spent),
    ).order_by("name")
    out = []
    for agent in rows:
        max_calls, max_tokens = agent_budget(agent)
        out.append(
            {
                "agent": agent,
                "profile": agent.model_profile or DEFAULT,
                "calls_today": agent.calls_today,
                "tokens_today": agent.tokens_today or 0,
                "daily_calls": max_calls,
                "daily_tokens": max_tokens,
                "budget_overridden": agent.model_daily_calls is not None
                or agent.model_daily_tokens is not None,
            }
        )
    return out


def _profile_snapshot(row: ModelProfile) -> dict:
    data = snapshot(row, exclude=("api_key",))
    data["api_key_set"] = bool(row.api_key)
    return data


def model_profile_save(
    *,
    actor,
    name: str,
    base_url: str = "",
    model: str = "",
    api_key: str | None = None,
    timeout_seconds: float | None = None,
    max_retries: int | None = None,
    daily_calls: int | None = None,
    daily_tokens: int | None = None,
    enabled: bool = True,
    notes: str = "",
    context_tokens: int | None = None,
    structured_output: str = "",
) -> ModelProfile:
    """Create or update a named profile (admins). `api_key=None` keeps the stored key, "" clears
    it. Audited without the key: only whether one is set."""
    with transaction.atomic():
        row = ModelProfile.objects.select_for_update().filter(name=name).first()
        before = _profile_snapshot(row) if row else None
        if row is None:
            row = ModelProfile(name=name)
        row.base_url, row.model = base_url, model
        if api_key is not None:
            row.api_key = api_key
        row.timeout_seconds, row.max_retries = timeout_seconds, max_retries
        row.daily_calls, row.daily_tokens = daily_calls, daily_tokens
        row.enabled, row.notes = enabled, notes
        row.context_tokens, row.structured_output = context_tokens, structured_output
        try:
            row.full_clean()
        except Exception as exc:  # Django's ValidationError → Invalid, for one error shape everywhere
            raise Invalid(getattr(exc, "message_dict", {"profile": [str(exc)]}))
        row.save()
        audit_record(
            "model_profile.saved",
            actor=actor,
            object_type="model_profile",
            object_ids=[row.pk],
            data={"name": name, "created": before is None, "api_key_set": bool(row.api_key)},
            revisions=[("model_profile", row.pk, before, _profile_snapshot(row))],
        )
    return row


def agent_model_set(
    *, actor, agent: Agent, profile: str, daily_calls: int | None, daily_tokens: int | None
) -> Agent:
    """Give an agent its model profile and (optionally) its own daily budget (admins)."""
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent.pk)
        before = {
            "model_profile": agent.model_profile,
            "model_daily_calls": agent.model_daily_calls,
            "model_daily_tokens": agent.model_daily_tokens,
        }
        agent.model_profile = "" if profile == DEFAULT else profile
        agent.model_daily_calls, agent.model_daily_tokens = daily_calls, daily_tokens
        agent.save(update_fields=["model_profile", "model_daily_calls", "model_daily_tokens"])
        after = {
            "model_profile": agent.model_profile,
            "model_daily_calls": agent.model_daily_calls,
            "model_daily_tokens": agent.model_daily_tokens,
        }
        audit_record(
            "agent.model_updated",
            actor=actor,
            owner=agent.name,
            object_type="agent",
            object_ids=[agent.pk],
            data=after,
            revisions=[("agent", agent.pk, before, after)],
        )
    return agent
