"""What both Dreaming stages share about a run: its actor, claiming a cursor (a stage A channel's,
a stage B agent's) for one run, counting the run's model calls, ending it (`run_through`: done,
failed or deferred) with the cursor's back-off, whether a cursor is held now, queueing a manual run, and the run list."""

from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from curation.models import DreamingRun, StageACursor, StageBCursor
from knowledge.errors import Conflict
from knowledge.llm import defer_later, deferral_pending, deferred_reason
from knowledge.llm.jobs import job_enqueue
from knowledge.principal import Principal

ACTOR = Principal.system("dreaming")
# A claim older than this belongs to a worker that died: a run takes at most a few minutes (its
# own time limit plus one model call with retries).
STUCK_AFTER = timedelta(minutes=15)
MAX_RETRY_MINUTES = 360


def run_open(
    *,
    stage: str,
    owner: str,
    of,
    cursor_model,
    trigger: str,
    started_by: str,
    unavailable: str,
    busy: Exception,
) -> tuple[DreamingRun, object]:
    """Start a run of `stage` for `of` (its cursor's `owner`: a stage A channel, a stage B agent).
    When `unavailable` says why the model cannot run, the run is recorded as skipped with that
    reason and no cursor is taken: (run, None). Otherwise the cursor is claimed with a conditional
    update — of two workers exactly one wins, the other gets `busy` raised — and (run, cursor) is
    returned. A claim older than STUCK_AFTER was left by a dead worker and is taken over: its run
    is recorded as abandoned."""
    now = timezone.now()
    if unavailable:
        run = DreamingRun.objects.create(
            stage=stage,
            trigger=trigger,
            state=DreamingRun.SKIPPED,
            reason=unavailable,
            started_by=started_by,
            started_at=now,
            finished_at=now,
            **{owner: of},
        )
        return run, None
    cursor_model.objects.get_or_create(**{owner: of})
    claimed = (
        cursor_model.objects.filter(pk=of.pk)
        .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - STUCK_AFTER))
        .update(claimed_at=now)
    )
    if not claimed:
        raise busy
    cursor = cursor_model.objects.get(pk=of.pk)
    if cursor.run_id:  # the dead worker's run
        DreamingRun.objects.filter(pk=cursor.run_id, state=DreamingRun.RUNNING).update(
            state=DreamingRun.FAILED,
            finished_at=now,
            reason="abandoned: its worker stopped before finishing; nothing it had not finished was written",
        )
    run = DreamingRun.objects.create(
        stage=stage, trigger=trigger, started_by=started_by, started_at=now, **{owner: of}
    )
    cursor_model.objects.filter(pk=of.pk).update(run=run)
    return run, cursor


def retry_delay(failures: int) -> timedelta:
    base = settings.BRAIN_DREAMING_RETRY_MINUTES
    return timedelta(minutes=min(base * 2 ** max(failures - 1, 0), MAX_RETRY_MINUTES))


def run_finish(run: DreamingRun, cursor_model, cursor_pk: int, state: str, reason: str = "") -> DreamingRun:
    """Record a run's end and release the cursor (a stage A channel's or a stage B agent's) it
    holds: a failure counts towards the cursor's back-off, success clears it, a deferral
    (run_defer) leaves both as they were."""
    now = timezone.now()
    run.refresh_from_db()
    run.state, run.reason, run.finished_at = state, reason[:2000], now
    run.save(update_fields=["state", "reason", "finished_at"])
    cursor = cursor_model.objects.get(pk=cursor_pk)
    if state == DreamingRun.DEFERRED:
        failures, retry_at = cursor.failures, cursor.retry_at
    else:
        failures = 0 if state == DreamingRun.DONE else cursor.failures + 1
        retry_at = None if state == DreamingRun.DONE else now + retry_delay(failures)
    cursor_model.objects.filter(pk=cursor_pk, run=run).update(
        claimed_at=None, run=None, last_run=run, failures=failures, retry_at=retry_at
    )
    return run


class RunDeferred(Exception):
    """The model server did not answer: the run is deferred (run_defer), not failed."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RunFailed(Exception):
    """The run's work failed with `reason` (a model failure, an invalid reply, a database error):
    what failed was not written, and the run ends failed."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def run_through(
    run: DreamingRun,
    cursor_model,
    cursor_pk: int,
    work: Callable[[], str],
    *,
    down: str,
    resume: str,
    deferrals: int,
) -> DreamingRun:
    """Do a run's `work` and end the run by how it went, the one ending of both stages: done,
    with the reason `work` returns; failed with a RunFailed's reason (the cursor's back-off
    counts it); deferred when the model server is `down` or stops answering (RunDeferred:
    run_defer, `resume` asked to run it again); an unexpected error ends it failed as an internal
    error and is raised again."""
    try:
        if down:
            raise RunDeferred(down)
        reason = work()
    except RunFailed as exc:
        return run_finish(run, cursor_model, cursor_pk, DreamingRun.FAILED, exc.reason)
    except RunDeferred as exc:
        return run_defer(run, cursor_model, cursor_pk, exc.reason, resume=resume, deferrals=deferrals)
    except Exception as exc:
        run_finish(
            run, cursor_model, cursor_pk, DreamingRun.FAILED, f"internal error: {type(exc).__name__}: {exc}"
        )
        raise
    return run_finish(run, cursor_model, cursor_pk, DreamingRun.DONE, reason)


def run_defer(
    run: DreamingRun, cursor_model, cursor_pk: int, reason: str, *, resume: str, deferrals: int
) -> DreamingRun:
    """The model server did not answer (knowledge.llm.outage): the run ends deferred — what its
    earlier batches wrote stays, nothing more is written, the cursor stays where it was with no
    failure counted (so the next run reads the same input at full size) — and `resume` (a task
    taking the cursor's owner id and the trigger) runs it again after the back-off; once: while
    one waits no second is asked for (the sweeps leave a cursor whose deferral waits to it)."""
    owner = run.channel_id if run.stage == DreamingRun.STAGE_A else run.agent_id
    what = f"dreaming stage {run.stage} {owner}"
    at = deferral_pending(resume, what=what) or defer_later(
        resume, owner, DreamingRun.RETRY, deferrals=deferrals + 1, what=what
    )
    note = f"{deferred_reason(reason)}; it runs again from {at:%Y-%m-%d %H:%M:%S} UTC with the same input"
    return run_finish(run, cursor_model, cursor_pk, DreamingRun.DEFERRED, note)


def run_count_call(run: DreamingRun, usage_id: int | None) -> None:
    """Count one model call of `run` and its usage row at once, outside the writes of the batch
    that made it, so a batch that then fails still shows the call it spent. The object follows
    the row (one worker holds a run: its cursor is claimed)."""
    run.refresh_from_db(fields=["model_calls", "usage_ids"])
    run.model_calls += 1
    if usage_id is not None:
        run.usage_ids = [*run.usage_ids, usage_id]
    DreamingRun.objects.filter(pk=run.pk).update(model_calls=run.model_calls, usage_ids=run.usage_ids)


def cursor_busy(cursor_model, pk: int) -> bool:
    """Whether a live run holds this cursor now (a claim older than STUCK_AFTER does not count:
    the next run takes it over)."""
    return cursor_model.objects.filter(pk=pk, claimed_at__gte=timezone.now() - STUCK_AFTER).exists()


# Per stage: what a run is of (its cursor's owner field), the cursor, the background job kind, and
# what a second run is told while one holds the cursor.
MANUAL_RUNS = {
    DreamingRun.STAGE_A: (
        "channel",
        StageACursor,
        "dreaming.stage_a",
        "another stage A run is reading channel {}",
    ),
    DreamingRun.STAGE_B: (
        "agent",
        StageBCursor,
        "dreaming.stage_b",
        "another stage B run is curating agent {}",
    ),
}


def run_request(*, stage: str, of, actor: Principal):
    """Queue a manual run of `stage` for `of` (a channel for stage A, an agent for stage B) as a
    background job and return the job (the model is never waited for inside a request). Raises
    Conflict while another run holds its cursor."""
    owner, cursor_model, kind, busy = MANUAL_RUNS[stage]
    if cursor_busy(cursor_model, of.pk):
        raise Conflict(busy.format(of.name))
    return job_enqueue(
        kind=kind, args={owner: of.pk, "started_by": f"{actor.kind_label}:{actor.name}"}, actor=actor
    )


def run_list(*, channel=None, stage: str = "", limit: int = 50):
    qs = DreamingRun.objects.select_related("channel", "agent")
    if channel is not None:
        qs = qs.filter(channel=channel)
    if stage:
        qs = qs.filter(stage=stage)
    return qs[:limit]
