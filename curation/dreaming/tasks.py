"""django-q2 entry points for Dreaming stage A. The sweep runs every minute and queues one run per
due channel; a run claims its channel, so a channel queued twice is still read once."""


def stage_a_sweep() -> int:
    """Queue a stage A run for every channel that is due (quiet, over the message threshold, or
    due for a retry). Nothing while the light model is unavailable."""
    from django_q.tasks import async_task

    from curation.dreaming.stage_a.selectors import stage_a_due

    due = stage_a_due()
    for channel_id, trigger in due:
        async_task(
            "curation.dreaming.tasks.stage_a_channel",
            channel_id,
            trigger,
            task_name=f"dreaming stage A channel {channel_id} ({trigger})",
        )
    return len(due)


def stage_a_channel(channel_id: int, trigger: str, started_by: str = "", deferrals: int = 0) -> str:
    """Run stage A over one channel. A scheduled run that is no longer due when the worker gets
    to it (another run read the channel meanwhile) does nothing and records no run. A run
    deferred by an outage comes back here (`deferrals` in a row so far) and is due by that."""
    from curation.dreaming.stage_a.selectors import channel_trigger
    from curation.dreaming.stage_a.services import ChannelBusy, stage_a_run
    from curation.models import DreamingRun
    from knowledge.models import Channel

    channel = Channel.objects.filter(pk=channel_id).first()
    if channel is None:
        return "no such channel"
    if trigger != DreamingRun.MANUAL and not deferrals and not channel_trigger(channel_id):
        return "not due any more"
    try:
        run = stage_a_run(channel=channel, trigger=trigger, started_by=started_by, deferrals=deferrals)
    except ChannelBusy as exc:
        return str(exc)
    return f"run {run.pk}: {run.state} {run.reason}".strip()


def stage_b_sweep() -> int:
    """Queue a stage B run for every agent with new episodes (stage A wrote some in a channel it
    takes part in) or new task outcomes. Nothing while the light model is unavailable."""
    from django_q.tasks import async_task

    from curation.dreaming.stage_b.selectors import stage_b_due

    due = stage_b_due()
    for agent_id in due:
        async_task(
            "curation.dreaming.tasks.stage_b_agent",
            agent_id,
            "threshold",
            task_name=f"dreaming stage B agent {agent_id}",
        )
    return len(due)


def stage_b_agent(agent_id: int, trigger: str, started_by: str = "", deferrals: int = 0) -> str:
    """Run stage B for one agent (a run claims the agent, so an agent queued twice is curated
    once at a time); a run deferred by an outage comes back here (`deferrals` in a row)."""
    from curation.dreaming.stage_b.services import AgentBusy, stage_b_run
    from knowledge.models import Agent

    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return "no such agent"
    try:
        run = stage_b_run(agent=agent, trigger=trigger, started_by=started_by, deferrals=deferrals)
    except AgentBusy as exc:
        return str(exc)
    return f"run {run.pk}: {run.state} {run.reason}".strip()
