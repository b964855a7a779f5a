"""Dreaming's manual runs as background jobs (knowledge.llm.jobs): stage A for a channel and
stage B for an agent, queued by the API and the console, run by a worker."""

from knowledge.llm.jobs import job_kind_register
from knowledge.models import Agent, Channel


def stage_a_job(*, channel: int, started_by: str) -> dict:
    from curation.dreaming.stage_a.services import stage_a_run
    from curation.models import DreamingRun

    run = stage_a_run(
        channel=Channel.objects.get(pk=channel), trigger=DreamingRun.MANUAL, started_by=started_by
    )
    summary = (
        f"Stage A run {run.pk} in {run.channel.name}: {run.state}; {run.episodes} episode(s) over "
        f"{run.messages} message(s), {run.noise} noise, {run.left} left for later."
    )
    if run.reason:
        summary += f" {run.reason}"
    return {"run": run.pk, "state": run.state, "summary": summary[:500]}


def stage_b_job(*, agent: int, started_by: str) -> dict:
    from curation.dreaming.stage_b.services import stage_b_run
    from curation.models import DreamingRun

    owner = Agent.objects.get(pk=agent)
    run = stage_b_run(agent=owner, trigger=DreamingRun.MANUAL, started_by=started_by)
    return {**_result(run), "agent": owner.name}


def _result(run) -> dict:
    summary = f"Dreaming run {run.pk} (stage {run.stage.upper()}): {run.state}"
    if run.reason:
        summary += f" — {run.reason}"
    return {"run": run.pk, "state": run.state, "summary": summary[:500]}


def register() -> None:
    from django.urls import reverse

    job_kind_register(
        "dreaming.stage_a", stage_a_job, title="Dreaming stage A", link=lambda r: reverse("knowledge-status")
    )
    job_kind_register(
        "dreaming.stage_b",
        stage_b_job,
        title="Dreaming stage B",
        link=lambda r: reverse("dreaming-tab") + f"?agent={r.get('agent', '')}&run={r.get('run', '')}",
    )
