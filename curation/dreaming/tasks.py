"""django-q2 entry points for Dreaming stage A. The sweep runs every minute and queues one run per
due channel; a run claims its channel, so a channel queued twice is still read once."""


def stage_a_sweep() -> int:
    """Queue a stage A run for every channel that is due (quiet, over the message threshold, or
    due for a retry). Nothing while the light model is unavailable."""
    from django_q.tasks import async_task

    from curation.dreaming.selectors import stage_a_due

    due = stage_a_due()
    for channel_id, trigger in due:
        async_task(
            "curation.dreaming.tasks.stage_a_channel",
            channel_id,
            trigger,
            task_name=f"dreaming stage A channel {channel_id} ({trigger})",
        )
    return len(due)


def stage_a_channel(channel_id: int, trigger: str, started_by: str = "") -> str:
    """Run stage A over one channel. A scheduled run that is no longer due when the worker gets
    to it (another run read the channel meanwhile) does nothing and records no run."""
    from curation.dreaming.selectors import channel_trigger
    from curation.dreaming.services import ChannelBusy, stage_a_run
    from curation.models import DreamingRun
    from knowledge.models import Channel

    channel = Channel.objects.filter(pk=channel_id).first()
    if channel is None:
        return "no such channel"
    if trigger != DreamingRun.MANUAL and not channel_trigger(channel_id):
        return "not due any more"
    try:
        run = stage_a_run(channel=channel, trigger=trigger, started_by=started_by)
    except ChannelBusy as exc:
        return str(exc)
    return f"run {run.pk}: {run.state} {run.reason}".strip()
