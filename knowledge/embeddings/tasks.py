"""django-q2 entry points for embeddings: draining the embedding backlog."""


def embedding_backlog_run(max_seconds: float = 50.0, linger_seconds: float = 0.0) -> dict:
    """Embed whatever lacks a vector from the current model (memories, entry blocks, messages,
    episodes). Scheduled every minute and queued after ingestion (that run lingers a few seconds
    for rows still arriving); idempotent, and several may run at once (rows are claimed with
    SKIP LOCKED). Stops before the next scheduled run."""
    from knowledge.embeddings.backlog import run_backlog

    return run_backlog(max_seconds=max_seconds, linger_seconds=linger_seconds)
