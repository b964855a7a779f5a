"""django-q2 entry points for the reconciler."""

from django.utils import timezone

from knowledge.llm import LIGHT, outage
from knowledge.models import Agent
from knowledge.principal import Principal
from knowledge.settings_store import setting_get
from memory.consolidation import ConsolidationBusy, ConsolidationOff
from memory.reconciler.selectors import reconciler_deferred, reconciler_due
from memory.reconciler.services import reconciler_defer, reconciler_run


def reconciler_tick(now=None) -> list[str]:
    """Every minute: a pass for each agent that is due (after 25 turns, or idle 10 minutes
    after activity). A busy plan or consolidation off skips it (due again next minute); an agent
    whose pass waits for the model server is left to that deferral. Returns the names of the
    agents reconciled."""
    now = now or timezone.now()
    if setting_get("BRAIN_MEMORY_CONSOLIDATION") == "off":
        return []
    actor = Principal.system("reconciler")
    done = []
    for agent in Agent.objects.order_by("pk"):
        trigger, turns = reconciler_due(agent, now=now)
        if not trigger or reconciler_deferred(agent.pk):
            continue
        try:
            reconciler_run(actor=actor, agent=agent, trigger=trigger, turns=turns, now=now)
        except ConsolidationOff:
            return done
        except ConsolidationBusy:
            continue
        done.append(agent.name)
    return done


def reconciler_resume(agent_id: int, trigger: str, jobs: list[str], deferrals: int = 0) -> str:
    """The django-q2 task a pass deferred by an outage comes back to (knowledge.llm.outage): the
    model server still down by the background check, or another plan running, defers it once
    more without a run; else the pass runs with the same jobs."""
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return "no such agent"
    down = outage(profile=LIGHT, agent=agent)
    if not down:
        try:
            run = reconciler_run(
                actor=Principal.system("reconciler"),
                agent=agent,
                trigger=trigger,
                jobs=tuple(jobs),
                deferrals=deferrals,
            )
        except ConsolidationOff as exc:
            return exc.message
        except ConsolidationBusy as exc:
            down = exc.message
        else:
            return f"run {run.pk}: {run.state} {run.note}".strip()
    reconciler_defer(agent=agent, trigger=trigger, jobs=jobs, deferrals=deferrals)
    return f"deferred again: {down}"
