"""Every background schedule Brain runs, in one table. `manage.py brain_schedules` creates or
updates them (idempotent); nobody creates schedules by hand."""


# (name, function, minutes between runs)
def schedule_table() -> list[tuple[str, str, int]]:
    return [
        ("worker heartbeat", "knowledge.tasks.worker_heartbeat", 1),
        ("embedding backlog", "curation.tasks.embedding_backlog_run", 1),
    ]
