"""Asking for the embedding backlog job after a write that adds rows without vectors (messages,
entry blocks, Dreaming's writes). Here, beside the job, so every writer asks the same way without
importing another writer."""

from django.conf import settings

from knowledge.kick import task_kick

# At most one embedding-backlog job is queued per web process per this many seconds; the job
# drains everything that lacks a vector, so more would only find nothing to do.
KICK_SECONDS = 5


def request_embedding_run() -> None:
    """Queue the embedding backlog job (knowledge.embeddings.tasks.embedding_backlog_run), at most once per
    KICK_SECONDS per process. Call it after commit; the every-minute schedule catches anything
    a skipped kick leaves behind. Never embeds in the caller's process unless the cluster runs
    tasks synchronously (tests)."""
    if not getattr(settings, "BRAIN_EMBEDDING_KICK", True):
        return
    from knowledge.embeddings import embedder as embeddings

    if not embeddings.enabled():
        return
    # While further kicks from this process are held back, the kicked run waits for the rows
    # still arriving (a bulk ingest posts batch after batch), so they start at once instead of
    # waiting for the next kick or the every-minute run.
    task_kick(
        "knowledge.embeddings.tasks.embedding_backlog_run", name="embedding backlog", seconds=KICK_SECONDS
    )
