"""Demo: episodes for the demo channels. With the light model available, stage A is queued for
every demo channel with messages past its cursor once the seed commits (the worker runs it, so
`BRAIN_DEMO=1 make run` shows episodes within a minute); the stage B sweep then curates the demo
agents from those episodes (within BRAIN_DREAMING_SWEEP_MINUTES; Knowledge → Dreaming shows the
runs, or "Run curation now" at once). Without one nothing is queued and the Status tab's stage A
and stage B sections and the Dreaming tab say why."""

from django.db import transaction

from curation.dreaming.stage_a.selectors import channel_lags
from curation.models import DreamingRun
from knowledge.llm import LIGHT, model_availability


def seed(*, channels) -> str:
    unavailable = model_availability(LIGHT)
    if unavailable:
        return f"stage A not queued: the light model is {unavailable} (Knowledge → Status explains)"
    wanted = {c.pk for c in channels.values()}
    due = [row.channel_id for row in channel_lags() if row.channel_id in wanted and row.lag]
    for channel_id in due:
        transaction.on_commit(lambda channel_id=channel_id: _queue(channel_id))
    return f"stage A queued for {len(due)} demo channel(s)" if due else ""


def _queue(channel_id: int) -> None:
    from django_q.tasks import async_task

    async_task(
        "curation.dreaming.tasks.stage_a_channel",
        channel_id,
        DreamingRun.MANUAL,
        "system:seed_demo",
        task_name=f"dreaming stage A channel {channel_id} (demo)",
    )
