"""django-q2 entry points of curation."""

from knowledge.vectors import run_backlog


def embedding_backlog_run(max_seconds: float = 50.0) -> dict:
    """Embed whatever lacks a vector from the current model (memories, entry blocks, messages,
    episodes). Scheduled every minute and queued after ingestion; idempotent, and several may
    run at once (rows are claimed with SKIP LOCKED). Stops before the next scheduled run."""
    return run_backlog(max_seconds=max_seconds)
