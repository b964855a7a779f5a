"""Reads for the reconciler: when an agent is due, and its last runs."""

import datetime

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from knowledge.llm import deferral_pending
from knowledge.models import Agent, Memory, Message
from memory.models import ReconcilerRun

RESUME = "memory.reconciler.tasks.reconciler_resume"  # the task a deferred pass comes back to


def deferral_name(agent_id: int) -> str:
    return f"reconciler pass of agent {agent_id}"


def reconciler_deferred(agent_id: int) -> bool:
    """Whether a pass over the agent waits for the model server (its deferral is pending): the
    tick and the expiry's digest pass leave the agent to it, so the pass does not run twice."""
    return deferral_pending(RESUME, what=deferral_name(agent_id)) is not None


def reconciler_waiting() -> list[int]:
    """The agents whose pass waits for the model server: short-term expiry keeps their
    conversations' episodes for the digest that pass will make."""
    return [pk for pk in Agent.objects.order_by("pk").values_list("pk", flat=True) if reconciler_deferred(pk)]


def last_run(agent: Agent) -> ReconcilerRun | None:
    return (
        ReconcilerRun.objects.filter(agent=agent)
        .select_related("plan")
        .order_by("-started_at", "-id")
        .first()
    )


def last_runs() -> list[dict]:
    """Every agent with its last reconciler run (None if it never ran), for Status."""
    latest = {}
    for run in (
        ReconcilerRun.objects.select_related("plan")
        .order_by("agent_id", "-started_at", "-id")
        .distinct("agent_id")
    ):
        latest[run.agent_id] = run
    return [{"agent": a, "run": latest.get(a.pk)} for a in Agent.objects.order_by("name")]


def turns_since(agent: Agent, since) -> tuple[int, datetime.datetime | None]:
    """(turns, last activity) of `agent` after `since` (everything when None). A turn is a
    distinct (conversation, turn) that the agent's memory writes name, or a message the agent
    said."""
    memories = Memory.objects.filter(owner=agent)
    messages = Message.objects.filter(speaker_agent=agent)
    if since is not None:
        memories = memories.filter(created_at__gt=since)
        messages = messages.filter(created_at__gt=since)
    turns = memories.filter(turn__isnull=False).values_list("conversation_id", "turn").distinct().count()
    turns += messages.count()
    last = [
        x
        for x in (memories.aggregate(t=Max("created_at"))["t"], messages.aggregate(t=Max("created_at"))["t"])
        if x
    ]
    return turns, max(last) if last else None


def reconciler_due(agent: Agent, *, now=None) -> tuple[str, int]:
    """Why `agent` is due for a reconciler pass now ('turns', 'idle' or '' when not due), and the
    turns seen since its last pass: BRAIN_RECONCILER_EVERY_TURNS turns, or activity followed by
    BRAIN_RECONCILER_IDLE_MINUTES quiet minutes."""
    now = now or timezone.now()
    last = (
        ReconcilerRun.objects.filter(agent=agent)
        .exclude(state=ReconcilerRun.SKIPPED)
        .order_by("-started_at")
        .first()
    )
    since = last.started_at if last else None
    turns, activity = turns_since(agent, since)
    if activity is None:
        return "", 0
    if turns >= settings.BRAIN_RECONCILER_EVERY_TURNS:
        return ReconcilerRun.TURNS, turns
    if activity <= now - datetime.timedelta(minutes=settings.BRAIN_RECONCILER_IDLE_MINUTES):
        return ReconcilerRun.IDLE, turns
    return "", turns


def _run_out(run: ReconcilerRun | None) -> dict | None:
    if run is None:
        return None
    return {
        "id": run.pk,
        "trigger": run.trigger,
        "state": run.state,
        "plan": run.plan_id,
        "plan_state": run.plan.state if run.plan_id else None,
        "counts": run.counts,
        "note": run.note,
        "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def reconciler_status() -> dict:
    """The Status section: the cadence and each agent's last run (JSON-safe)."""
    return {
        "every_turns": settings.BRAIN_RECONCILER_EVERY_TURNS,
        "idle_minutes": settings.BRAIN_RECONCILER_IDLE_MINUTES,
        "agents": [{"agent": row["agent"].name, "last_run": _run_out(row["run"])} for row in last_runs()],
    }


def reconciler_alerts(data: dict) -> list[dict]:
    failed = [
        a["agent"] for a in data["agents"] if a["last_run"] and a["last_run"]["state"] == ReconcilerRun.FAILED
    ]
    if not failed:
        return []
    return [
        {"level": "warning", "text": f"The last reconciler run failed for {', '.join(failed)} (see Status)."}
    ]
