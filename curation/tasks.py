"""django-q2 entry points for curation: the distiller and scheduled consolidation."""

from knowledge.principal import Principal


def distill_conversation(conversation_id: int, deferrals: int = 0) -> str:
    """Distil one finished conversation; `deferrals`: outages in a row so far, when a run
    deferred by one comes back (curation.distiller)."""
    from curation.distiller import distill_conversation as distill

    run = distill(conversation_id, deferrals=deferrals)
    return run.state if run else "nothing to do"


def distill_pending() -> int:
    from curation.distiller import distill_pending as sweep

    return sweep()


def consolidation_scheduled() -> str:
    """Every 6 hours: one consolidation run over every store, in the configured mode; none
    while a run deferred by an outage waits to come back (that one runs instead)."""
    from memory.consolidation import PlanConflict, consolidation_deferred, consolidation_run

    waiting = consolidation_deferred()
    if waiting:
        return f"left to the deferred run, which comes back at {waiting:%Y-%m-%d %H:%M:%S} UTC"
    try:
        plan = consolidation_run(actor=Principal.system("consolidation"))
    except PlanConflict as exc:  # off, or another run is in progress
        return exc.message
    return f"plan {plan.pk}: {plan.state}"
