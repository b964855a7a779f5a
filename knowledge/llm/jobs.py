"""Model-backed runs asked for by a person or an API client, run in the background: the request
queues a ModelJob (after its transaction commits, django-q2 runs it) and answers at once with
the job; the console polls the job's fragment (htmx, every 2 s while it is queued or running)
and shows the result when it is done. No request waits on a model call.

A job kind is registered by the layer that owns the run (`job_kind_register` in its app's
ready()): the base layer knows only the table. A kind's function takes the job's args (plain
JSON) and returns the result (JSON: the ids of what it made, a short summary); a DomainError it
raises fails the job with its message."""

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from knowledge.errors import DomainError
from knowledge.models import ModelJob


@dataclass(frozen=True)
class JobKind:
    run: Callable[..., dict]
    title: str
    link: Callable[[dict], str] | None = None  # where the console shows the result


_kinds: dict[str, JobKind] = {}


def job_kind_register(kind: str, run: Callable[..., dict], *, title: str, link=None) -> None:
    _kinds[kind] = JobKind(run=run, title=title, link=link)


def job_title(job: ModelJob) -> str:
    return _kinds[job.kind].title if job.kind in _kinds else job.kind


def job_link(job: ModelJob) -> str:
    kind = _kinds.get(job.kind)
    # A failed run (the job says why) is shown where a done one is: its result names it.
    finished = job.state == ModelJob.DONE or (
        job.state in (ModelJob.FAILED, ModelJob.DEFERRED) and job.result
    )
    return kind.link(job.result) if kind and kind.link and finished else ""


def _label(actor) -> str:
    return actor if isinstance(actor, str) else f"{actor.kind_label}:{actor.name}"


def job_enqueue(*, kind: str, args: dict, actor) -> ModelJob:
    """Queue a run of `kind` with `args`; it starts once the current transaction commits."""
    if kind not in _kinds:
        raise ValueError(f"unknown job kind {kind}")
    job = ModelJob.objects.create(kind=kind, args=args, requested_by=_label(actor))
    from django_q.tasks import async_task

    transaction.on_commit(lambda: async_task("knowledge.llm.jobs.job_run", job.pk))
    return job


def job_run(job_id: int) -> str:
    """The django-q2 task: run one queued job once (claimed with a conditional update)."""
    now = timezone.now()
    if not ModelJob.objects.filter(pk=job_id, state=ModelJob.QUEUED).update(
        state=ModelJob.RUNNING, started_at=now
    ):
        return "not claimed: already run or running"
    job = ModelJob.objects.get(pk=job_id)
    try:
        result = _kinds[job.kind].run(**job.args)
    except DomainError as exc:
        _end(job, ModelJob.FAILED, error=getattr(exc, "message", str(exc)))
        return "failed"
    except Exception as exc:
        _end(job, ModelJob.FAILED, error=f"internal error: {type(exc).__name__}: {exc}")
        raise
    result = result or {}
    if result.get("state") == "failed":  # the run it made failed (a stage A run, say): so did the job
        _end(job, ModelJob.FAILED, result=result, error=result.get("summary", "the run failed"))
        return "failed"
    if result.get("state") == "deferred":  # the model server did not answer: not done, not failed
        _end(job, ModelJob.DEFERRED, result=result)
        return "deferred"
    _end(job, ModelJob.DONE, result=result)
    return "done"


def _end(job: ModelJob, state: str, *, result=None, error: str = "") -> None:
    ModelJob.objects.filter(pk=job.pk).update(
        state=state, result=result or {}, error=error[:2000], finished_at=timezone.now()
    )


def job_public(job: ModelJob) -> dict:
    return {
        "id": job.pk,
        "kind": job.kind,
        "title": job_title(job),
        "state": job.state,
        "args": job.args,
        "result": job.result,
        "error": job.error,
        "requested_by": job.requested_by,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "url": f"/api/model-jobs/{job.pk}",
    }


def actor_args(actor) -> dict:
    """Who asked, as a job keeps it (plain JSON), for the run's audit events."""
    return {"kind": actor.kind_label, "name": actor.name, "role": getattr(actor, "role", None)}


def actor_from(args: dict):
    from knowledge.principal import Principal

    return Principal(kind=args["kind"], name=args["name"], role=args.get("role"))
