"""Queueing a consolidation run or a reconciler pass (each calls the model: never inside a
request). Off mode and a running plan are refused at once (PlanConflict); the REST API and the
console both queue through here."""

from knowledge.llm.jobs import actor_args, job_enqueue
from knowledge.settings_store import setting_get
from memory.consolidation import ConsolidationBusy, ConsolidationOff
from memory.models import ConsolidationPlan


def run_enqueue(*, kind: str, args: dict, actor):
    if setting_get("BRAIN_MEMORY_CONSOLIDATION") == "off":
        raise ConsolidationOff("Consolidation is off (BRAIN_MEMORY_CONSOLIDATION is off).")
    if ConsolidationPlan.objects.filter(state=ConsolidationPlan.RUNNING).exists():
        raise ConsolidationBusy("Another consolidation run is in progress; try again when it has finished.")
    return job_enqueue(kind=kind, args={"actor": actor_args(actor), **args}, actor=actor)


def consolidation_enqueue(*, actor, owner=None, store: str = ""):
    """A consolidation run, of one owner's (and store's) memories or of all."""
    return run_enqueue(
        kind="consolidation.run", args={"owner": owner.pk if owner else None, "store": store}, actor=actor
    )


def reconcile_enqueue(*, actor, agent):
    """A reconciler pass over `agent`'s memories."""
    return run_enqueue(kind="reconciler.run", args={"agent": agent.pk}, actor=actor)
