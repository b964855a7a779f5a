"""django-q2 entry points for curation: the distiller and scheduled consolidation."""

from knowledge.principals.principal import Principal


def distill_conversation(conversation_id: int) -> str:
    from curation.distiller import distill_conversation as distill

    run = distill(conversation_id)
    return run.state if run else "nothing to do"


def distill_pending() -> int:
    from curation.distiller import distill_pending as sweep

    return sweep()


def consolidation_scheduled() -> str:
    """Every 6 hours: one consolidation run over every store, in the configured mode."""
    from memory.consolidation import PlanConflict, consolidation_run

    try:
        plan = consolidation_run(actor=Principal.system("consolidation"))
    except PlanConflict as exc:  # off, or another run is in progress
        return exc.message
    return f"plan {plan.pk}: {plan.state}"


def embedding_backlog_run(max_seconds: float = 50.0, linger_seconds: float = 0.0) -> dict:
    """Embed whatever lacks a vector from the current model (memories, entry blocks, messages,
    episodes). Scheduled every minute and queued after ingestion (that run lingers a few seconds
    for rows still arriving); idempotent, and several may run at once (rows are claimed with
    SKIP LOCKED). Stops before the next scheduled run."""
    from knowledge.embeddings.backlog import run_backlog

    return run_backlog(max_seconds=max_seconds, linger_seconds=linger_seconds)
