"""What GET /api/status and the console's Status tab report: the embedding configuration, vector
coverage and the re-embedding backlog per kind, evidence counts, pinned-memo budgets, skill
overlays over their budget, the
background jobs (worker heartbeat, waiting, stuck and failed tasks) and the alerts drawn from
them, most urgent first; and the sections other packages report (SECTIONS)."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone

from curation.dreaming.stage_a.selectors import stage_a_alerts, stage_a_status
from curation.dreaming.stage_b.selectors import stage_b_alerts, stage_b_status
from curation.model_status import models_alerts, models_status
from knowledge import health
from knowledge.embeddings import embedder as embeddings
from knowledge.embeddings.backlog import backlog_progress, coverage
from knowledge.llm.profiles import DEFAULT, LIGHT, model_availability
from knowledge.materials.selectors import materials_alerts, materials_status
from knowledge.models import Agent, Channel, Conversation, Episode, Message, PinnedMemo
from knowledge.principals.selectors import worker_signals
from knowledge.replica import replica_configured, replica_lag_seconds
from knowledge.tokens import count_tokens
from memory.lifecycle.selectors import conflicts_alerts, conflicts_status
from memory.recall.memo import memo_budget_tokens
from memory.reconciler.selectors import reconciler_alerts, reconciler_status
from memory.skills.selectors import overlays_over_budget


@dataclass(frozen=True)
class StatusSection:
    """A section of the Status tab and GET /api/status that another package reports: `report()`
    gives its JSON-safe data under `name`, `template` renders it on the tab, `alerts(data)` adds
    its alerts."""

    name: str
    template: str
    report: Callable[[], dict]
    alerts: Callable[[dict], list[dict]]


# In this order on the tab and in the JSON. Status is on the top layer: it imports its sections.
SECTIONS = (
    StatusSection(
        name="dreaming_stage_a",
        template="curation/dreaming/_status_stage_a.html",
        report=stage_a_status,
        alerts=stage_a_alerts,
    ),
    StatusSection(
        name="dreaming_stage_b",
        template="curation/dreaming/_status_stage_b.html",
        report=stage_b_status,
        alerts=stage_b_alerts,
    ),
    StatusSection(
        name="models", template="curation/_status_models.html", report=models_status, alerts=models_alerts
    ),
    StatusSection(
        name="materials",
        template="knowledge/materials/_status.html",
        report=materials_status,
        alerts=materials_alerts,
    ),
    StatusSection(
        name="reconciler",
        template="memory/reconciler/_status.html",
        report=reconciler_status,
        alerts=reconciler_alerts,
    ),
    StatusSection(
        name="conflicts",
        template="memory/lifecycle/_status_conflicts.html",
        report=conflicts_status,
        alerts=conflicts_alerts,
    ),
)


def status_sections() -> tuple[StatusSection, ...]:
    return SECTIONS


def recall_status() -> dict:
    try:
        config = embeddings.describe()
        config_error = ""
    except embeddings.EmbeddingError as exc:
        config, config_error = {"backend": "invalid"}, str(exc)
    cover = coverage() if not config_error else {}
    worker = worker_signals()
    backlog = {kind: c["backlog"] for kind, c in cover.items()}
    memos = []
    budget = memo_budget_tokens()
    for memo in PinnedMemo.objects.select_related("agent").order_by("agent__name"):
        tokens = count_tokens(memo.text)
        memos.append(
            {"agent": memo.agent.name, "tokens": tokens, "budget_tokens": budget, "over": tokens > budget}
        )
    return {
        "embeddings": {**config, **({"error": config_error} if config_error else {})},
        # Each backlog once: `backlog` per kind; `vector_coverage` the totals it is drawn from.
        "backlog": backlog,
        # How fast it drains now, and the time left at that rate.
        "backlog_progress": backlog_progress(sum(backlog.values())),
        "vector_coverage": {
            kind: {"total": c["total"], "embedded": c["embedded"]} for kind, c in cover.items()
        },
        "evidence": {
            "channels": Channel.objects.count(),
            "messages": Message.objects.count(),
            "episodes": Episode.objects.count(),
            "open_conversations": Conversation.objects.filter(status=Conversation.OPEN).count(),
        },
        "agents": Agent.objects.aggregate(n=Count("id"))["n"],
        "pinned_memos": memos,
        "overlays_over_budget": overlays_over_budget(),
        "worker_heartbeat": worker["beat"],
        "worker": health.worker_state(
            worker["beat"], oldest_waiting=worker["oldest_waiting"], job_started=worker["job_started"]
        ),
        **({"replica": replica_report()} if replica_configured() else {}),
        **{section.name: section.report() for section in status_sections()},
    }


# What an agent or an integration sees of the report (GET /api/status): every count, and of the
# listed items only its own (`access.report_item_visible`, by the field that names the item's
# agent or channel; lint items by whether it reads their entry or memory). A list of items not
# named here is left out for them, so a section added later shows nobody else's titles by default.
NARROWED_LISTS = {
    ("pinned_memos",): "agent",
    ("overlays_over_budget",): "agent",
    ("dreaming_stage_a", "channels"): "channel",
    ("dreaming_stage_b", "agents"): "agent",
    ("dreaming_stage_b", "lints", "unsourced_blocks"): "entry",
    ("dreaming_stage_b", "lints", "ended_but_current"): "memory",
    ("dreaming_stage_b", "lints", "contradictions"): "entry",
    ("materials", "stuck"): "agent",
    ("materials", "failed"): "agent",
    ("materials", "withdrawn"): "agent",
    ("reconciler", "agents"): "agent",
}


def status_for(principal, status: dict) -> dict:
    """The report as `principal` may see it: people with a role see all of it; agents and
    integrations every count and only their own items (NARROWED_LISTS)."""
    if principal.is_reviewer:
        return status
    from knowledge import access
    from knowledge.models import Entry, Memory

    readable = {
        "entry": lambda ids: set(
            Entry.objects.filter(access.readable_q(principal), pk__in=ids).values_list("pk", flat=True)
        ),
        "memory": lambda ids: set(
            Memory.objects.filter(access.memory_readable_q(principal), pk__in=ids).values_list(
                "pk", flat=True
            )
        ),
    }

    def narrow(path: tuple, value):
        if isinstance(value, dict):
            return {k: narrow((*path, k), v) for k, v in value.items()}
        if not (isinstance(value, list) and any(isinstance(item, dict) for item in value)):
            return value
        by = NARROWED_LISTS.get(path)
        if by in ("agent", "channel"):
            return [item for item in value if access.report_item_visible(principal, **{by: item.get(by)})]
        if by in readable:
            ids = {item.get(by) for item in value} | {item.get("other") for item in value if "other" in item}
            seen = readable[by]({i for i in ids if isinstance(i, int)})
            return [
                item for item in value if item.get(by) in seen and item.get("other", item.get(by)) in seen
            ]
        return []

    return narrow((), status)


# The read replica is this far behind before Status warns (searches and lists then miss that
# many seconds of writes).
REPLICA_LAG_WARN_SECONDS = 60


def replica_report() -> dict:
    """The read replica (DATABASE_REPLICA_URL): whether it answers and how far behind it is."""
    lag = replica_lag_seconds()
    return {"answering": lag is not None, "lag_seconds": None if lag is None else round(lag, 1)}


WAITING_TOO_LONG = timedelta(minutes=5)
GATE_ERRORS_SINCE = timedelta(days=14)
# What stops without a model, per built-in profile, in words a reviewer knows.
MODEL_STAGES = {
    DEFAULT: "the eval gate's checks (an agent's own profile is the default one unless set)",
    LIGHT: "the distiller, merges and summaries, Dreaming (stages A and B), material learning and "
    "conversation summaries",
}
# A backlog is normal right after ingestion (the worker drains the model's own speed); past
# this many texts it is a re-embedding or a worker falling behind, worth a warning.
BACKLOG_WARN_TEXTS = 5000
LISTED = 10


def job_status() -> dict:
    """django-q2's ORM broker: a queued task's `lock` is when it became due; a claimed one's is
    the claim time plus Q_CLUSTER["retry"]. A task claimed longer ago than Q_CLUSTER["timeout"]
    is stuck (its worker was killed or hangs; it is handed out again after `retry`)."""
    from django_q.models import Failure, OrmQ

    now = timezone.now()
    conf = settings.Q_CLUSTER
    retry, timeout = timedelta(seconds=conf["retry"]), timedelta(seconds=conf["timeout"])
    queue = OrmQ.objects.using(conf.get("orm", "default"))
    waiting = queue.filter(lock__lte=now)
    oldest = waiting.order_by("lock").values_list("lock", flat=True).first()
    stuck_tasks = queue.filter(lock__gt=now, lock__lt=now + retry - timeout)
    stuck = [
        {"task": task.name(), "func": task.func(), "claimed_at": task.lock - retry}
        for task in stuck_tasks.order_by("lock")[:LISTED]
    ]
    since = now - timedelta(days=1)
    failures = Failure.objects.filter(stopped__gte=since).order_by("-stopped")
    return {
        "waiting": waiting.count(),
        "oldest_waiting_since": oldest,
        "running": queue.filter(lock__gt=now).count(),
        "stuck": stuck,
        "stuck_count": len(stuck) if len(stuck) < LISTED else stuck_tasks.count(),
        "failed_last_day": failures.count(),
        "recent_failures": [
            {"name": f.name, "func": f.func, "stopped": f.stopped, "result": str(f.result or "")[:500]}
            for f in failures[:LISTED]
        ],
    }


def drain_estimate(progress: dict) -> str:
    """The backlog's pace in words, for Status and its alert."""
    if not progress["rate_per_second"]:
        return "Nothing was embedded in the last minutes: is the worker running?"
    rate = f"The worker embeds {progress['rate_per_second']:,.1f} texts/s"
    if not progress["seconds_left"]:
        return f"{rate}; nothing is left."
    return f"{rate}: about {_duration(progress['seconds_left'])} left."


def _duration(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def alerts(status: dict, jobs: dict) -> list[dict]:
    """What needs a person, most urgent first: `level` is "error" (something is not working) or
    "warning" (something will go wrong or is being put off)."""
    now = timezone.now()
    out = []
    beat = status["worker_heartbeat"]
    if status["worker"] == "stuck":
        out.append(
            {
                "level": "error",
                "text": f"The worker reports, but jobs have waited since {jobs['oldest_waiting_since']:%Y-%m-%d %H:%M} "
                "UTC and it has started none: restart it (make run restarts it when it exits).",
            }
        )
    elif status["worker"] != "ok":
        silent = f"has not reported since {beat:%Y-%m-%d %H:%M} UTC" if beat else "has never reported"
        out.append(
            {
                "level": "error",
                "text": f"The worker {silent}: background jobs (embedding backlog, provenance checks, "
                "consolidation) are not running. Start it with python -m brainsite.ops.worker (make run starts one).",
            }
        )
    if status["embeddings"].get("error"):
        out.append(
            {"level": "error", "text": f"Embeddings are misconfigured: {status['embeddings']['error']}"}
        )
    for task in jobs["stuck"]:
        out.append(
            {
                "level": "error",
                "text": f"Job {task['func']} ({task['task']}) was claimed at {task['claimed_at']:%Y-%m-%d %H:%M} "
                "UTC and has not finished: its worker hangs or was killed.",
            }
        )
    if jobs["failed_last_day"]:
        out.append({"level": "warning", "text": f"{jobs['failed_last_day']} job(s) failed in the last day."})
    if jobs["oldest_waiting_since"] and now - jobs["oldest_waiting_since"] > WAITING_TOO_LONG:
        out.append(
            {
                "level": "warning",
                "text": f"{jobs['waiting']} job(s) waiting, the oldest since "
                f"{jobs['oldest_waiting_since']:%Y-%m-%d %H:%M} UTC: the workers are busy or down.",
            }
        )
    out += model_alerts(now)
    backlog = sum(status["backlog"].values())
    if backlog > BACKLOG_WARN_TEXTS:
        parts = ", ".join(f"{n:,} {kind}" for kind, n in status["backlog"].items() if n)
        out.append(
            {
                "level": "warning",
                "text": f"{backlog:,} text(s) wait for a vector ({parts}); until then only the keyword routes "
                f"find them. {drain_estimate(status['backlog_progress'])}",
            }
        )
    replica = status.get("replica")
    if replica and not replica["answering"]:
        out.append(
            {
                "level": "error",
                "text": "The read replica (DATABASE_REPLICA_URL) does not answer: searches, lists and the event "
                "feed are read from the primary until it does.",
            }
        )
    elif replica and replica["lag_seconds"] > REPLICA_LAG_WARN_SECONDS:
        out.append(
            {
                "level": "warning",
                "text": f"The read replica is {replica['lag_seconds']:,.0f} s behind the primary: searches and lists "
                "read from it miss the newest writes.",
            }
        )
    for section in status_sections():
        if section.name in status:
            out += section.alerts(status[section.name])
    for memo in status["pinned_memos"]:
        if memo["over"]:
            out.append(
                {
                    "level": "warning",
                    "text": f"The pinned memo of {memo['agent']} counts {memo['tokens']:,} tokens, over its "
                    f"budget of {memo['budget_tokens']:,}; context compilation cuts it.",
                }
            )
    for overlay in status["overlays_over_budget"]:
        out.append(
            {
                "level": "warning",
                "text": f"The experience of {overlay['agent']} with skill {overlay['skill']} counts "
                f"{overlay['tokens']:,} tokens, over the overlay budget of {overlay['budget_tokens']:,}; "
                "context compilation leaves its last lessons out. Revise or remove lessons in the agent library.",
            }
        )
    out.sort(key=lambda alert: alert["level"] != "error")  # errors first, each kind in its order
    return out


def model_alerts(now=None) -> list[dict]:
    """A model-backed stage that cannot run (no model set up, switched off, over its budget) and
    eval-gate checks that could not run: each an alert naming the page that fixes it."""
    from memory.models import GateCheck

    now = now or timezone.now()
    out = []
    unavailable = {name: model_availability(name, now=now) for name in MODEL_STAGES}
    models_page = reverse("model-list")
    for name, why in unavailable.items():
        if not why or (name == LIGHT and unavailable[DEFAULT] and why.startswith("not configured")):
            continue
        if why.startswith("unreachable"):
            continue  # the Models section's one alert per server says it (curation.model_status)
        fix = "Set up a model on the Models page"
        if why.startswith("not configured"):
            text = f"No model is set up for the {name} profile, so {MODEL_STAGES[name]} do not run"
            if name == DEFAULT:
                text = (
                    "No model is set up, so the distiller, merges and summaries, Dreaming (stages A "
                    "and B), material learning and the eval gate do not run"
                )
            text += ". Recall, review, provenance and exact-duplicate consolidation work without one."
        elif why.startswith("disabled"):
            text = f"The {name} model profile is switched off: {MODEL_STAGES[name]} do not run."
            fix = "Switch it on on the Models page"
        else:
            text = f"The {name} model profile is over its budget ({why}): {MODEL_STAGES[name]} wait."
            fix = "Raise its budget on the Models page"
        out.append({"level": "error", "text": text, "fix": {"label": fix, "url": models_page}})
    errors = GateCheck.objects.filter(
        verdict__in=[GateCheck.UNCHECKED, GateCheck.ERROR], created_at__gte=now - GATE_ERRORS_SINCE
    )
    count = errors.count()
    if count:
        latest = errors.order_by("-created_at").first()
        out.append(
            {
                "level": "error",
                "text": f"{count} eval-gate check{'s' if count != 1 else ''} could not run in the last 14 days "
                f"(latest, for memory #{latest.memory_id}: {latest.reason or 'no reason recorded'}).",
                "fix": {"label": "Open the Eval gate page", "url": reverse("gate")},
            }
        )
    return out
