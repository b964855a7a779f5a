"""An outage is not a failure of the request (issue 52). When the model server does not answer — the
background check (knowledge.llm.reach) finds its endpoint down before a call, or a call fails on
the transport: no connection, a timeout, a 5xx or 429, no free slot (ModelUnreachable) — a
model-backed job defers: it writes nothing more, keeps its input (it does not read less, and no
failed attempt is counted against it), and runs again after a back-off, once the server answers.
Only a refusal of the request itself (too long for the context, an invalid or cut reply) may make a
job read less. The distiller, the eval gate, Dreaming stages A and B, material learning,
consolidation, the reconciler, the conversation-history fold and the relation finder's sweep all
ask here, so the rule lives once. A job deferred through `defer_later` is the deferral's to run:
the regular path that would also start it (a sweep, a tick, a compilation) asks `deferral_pending`
first and leaves it alone, so it does not run twice nor defer twice."""

import ast
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from knowledge.llm.client import ModelError, ModelUnreachable
from knowledge.llm.profiles import endpoint_down

DEFER_MAX = timedelta(minutes=30)  # an outage of hours is retried every half hour, never given up


def outage(exc: ModelError | None = None, *, profile: str | None = None, agent=None) -> str:
    """Why the job should defer now ("" when it should go on). With `exc`: whether that model
    failure was an outage (its reason). Without: whether the background check finds the
    profile's endpoint down, so the job does not call it at all."""
    if exc is not None:
        return exc.reason if isinstance(exc, ModelUnreachable) else ""
    return endpoint_down(profile, agent=agent)


def defer_delay(deferrals: int) -> timedelta:
    """The back-off before the `deferrals`-th retry: BRAIN_MODEL_DEFER_SECONDS, doubling, at most
    DEFER_MAX."""
    doublings = min(max(deferrals - 1, 0), 32)  # past that the cap holds anyway (and timedelta overflows)
    seconds = settings.BRAIN_MODEL_DEFER_SECONDS * 2**doublings
    return min(timedelta(seconds=seconds), DEFER_MAX)


def deferred_reason(reason: str) -> str:
    """How a deferred job says why (Status, run pages and the API read it)."""
    return f"deferred: {reason}"


def defer_later(func: str, *args, deferrals: int, what: str) -> datetime:
    """Run the django-q2 task `func(*args, deferrals=deferrals)` once, after the back-off of its
    `deferrals`-th try (a one-off schedule, which `brain_schedules` leaves alone). The task
    checks the endpoint again first and, still down, defers itself once more. Returns when."""
    from django_q.models import Schedule

    at = timezone.now() + defer_delay(deferrals)
    Schedule.objects.create(
        name=f"deferred: {what}"[:100],
        func=func,
        args=repr(tuple(args)),
        kwargs=repr({"deferrals": deferrals}),
        schedule_type=Schedule.ONCE,
        repeats=-1,  # a one-off schedule django-q2 deletes once it has started its task
        next_run=at,
    )
    return at


def deferral_pending(func: str, *, what: str) -> datetime | None:
    """When the run of `func` deferred by `defer_later(func, …, what=what)` starts, None when no
    such run waits (its one-off schedule was started or never made). A sweep leaves a job that
    waits to its deferral, and a job that defers again while one waits does not add another."""
    from django_q.models import Schedule

    return (
        Schedule.objects.filter(func=func, name=f"deferred: {what}"[:100], schedule_type=Schedule.ONCE)
        .exclude(repeats=0)
        .order_by("next_run")
        .values_list("next_run", flat=True)
        .first()
    )


def deferrals_waiting(func: str) -> list[tuple]:
    """The arguments (as given to `defer_later`) of every deferred run of `func` that still
    waits: a sweep over many items leaves those to their deferrals."""
    from django_q.models import Schedule

    rows = (
        Schedule.objects.filter(func=func, schedule_type=Schedule.ONCE)
        .exclude(repeats=0)
        .values_list("args", flat=True)
    )
    return [ast.literal_eval(args or "()") for args in rows]
