"""django-q2 entry points for the reconciler."""

from django.utils import timezone

from knowledge.models import Agent
from knowledge.principal import Principal
from knowledge.settings_store import setting_get
from memory.consolidation import ConsolidationBusy, ConsolidationOff
from memory.reconciler.selectors import reconciler_due
from memory.reconciler.services import reconciler_run


def reconciler_tick(now=None) -> list[str]:
    """Every minute: a pass for each agent that is due (after 25 turns, or idle 10 minutes
    after activity). A busy plan or consolidation off skips it (due again next minute).
    Returns the names of the agents reconciled."""
    now = now or timezone.now()
    if setting_get("BRAIN_MEMORY_CONSOLIDATION") == "off":
        return []
    actor = Principal.system("reconciler")
    done = []
    for agent in Agent.objects.order_by("pk"):
        trigger, turns = reconciler_due(agent, now=now)
        if not trigger:
            continue
        try:
            reconciler_run(actor=actor, agent=agent, trigger=trigger, turns=turns, now=now)
        except ConsolidationOff:
            return done
        except ConsolidationBusy:
            continue
        done.append(agent.name)
    return done
