"""Every background schedule Brain runs, in one table. `manage.py brain_schedules` creates or
updates them (idempotent); nobody creates schedules by hand."""

from django.conf import settings


# (name, function, minutes between runs)
def schedule_table() -> list[tuple[str, str, int]]:
    return [
        # consolidation every 6 hours; finished conversations the distiller missed
        ("memory consolidation", "curation.tasks.consolidation_scheduled", 360),
        ("distiller sweep", "curation.tasks.distill_pending", 10),
        # whether each model profile's endpoint answers (Status shows `unreachable`)
        ("model endpoints check", "knowledge.llm.reach.endpoints_check", 5),
        ("provenance check", "memory.tasks.provenance_check", settings.BRAIN_PROVENANCE_CHECK_MINUTES),
        ("short-term memory expiry", "memory.tasks.expire_short_term_memory", 60),
        ("eval gate (pending and put-off checks)", "memory.tasks.gate_run_pending", 15),
        # due agents only: every BRAIN_RECONCILER_EVERY_TURNS turns or BRAIN_RECONCILER_IDLE_MINUTES idle
        ("reconciler (due agents)", "memory.reconciler.tasks.reconciler_tick", 1),
        ("embedding backlog", "knowledge.embeddings.tasks.embedding_backlog_run", 1),
        ("dreaming stage A (quiet and busy channels)", "curation.dreaming.tasks.stage_a_sweep", 1),
        ("webhook deliveries (new memory events, due retries)", "knowledge.events.tasks.webhooks_run", 1),
        ("keyword statistics compaction", "knowledge.tasks.term_stats_compact", 60),
        ("materials stuck in learning (retry or fail)", "knowledge.materials.tasks.learning_sweep", 5),
        (
            "dreaming stage B (agents with new episodes or task outcomes)",
            "curation.dreaming.tasks.stage_b_sweep",
            settings.BRAIN_DREAMING_SWEEP_MINUTES,
        ),
    ]
