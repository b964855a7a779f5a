from django.db import models


class DistillerRun(models.Model):
    """The distiller's work on one finished conversation: a conversation is distilled once.
    A failed attempt (model unavailable, invalid output) may be retried a few times."""

    PENDING, RUNNING, DONE, FAILED, SKIPPED = "pending", "running", "done", "failed", "skipped"
    STATES = [(s, s) for s in (PENDING, RUNNING, DONE, FAILED, SKIPPED)]
    MAX_ATTEMPTS = 3

    conversation = models.OneToOneField(
        "knowledge.Conversation", on_delete=models.CASCADE, related_name="distiller_run"
    )
    state = models.CharField(max_length=10, choices=STATES, default=PENDING, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    memory_ids = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)  # why it failed or was skipped
    usage_id = models.BigIntegerField(null=True, blank=True)  # the ModelUsage row of the last attempt
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"distiller run for conversation {self.conversation_id} ({self.state})"


class DreamingRun(models.Model):
    """One Dreaming run: stage A over one channel's messages, or stage B for one agent. It
    records why it ran (`trigger`), how it ended (`state`, and `reason` when it failed or did
    not run), what it did and the ModelUsage rows of its calls. Audit events it writes carry its
    id. Stage A: `batches`, `messages` covered, `noise`, `episodes` written, `left` for the next
    batch. Stage B: `materials` scanned (episodes and task outcomes), `episodes` and `messages`
    opened, `operations` and `skill_updates` applied, `dropped` operations with their reasons."""

    STAGE_A, STAGE_B = "a", "b"
    STAGES = [(STAGE_A, "stage A"), (STAGE_B, "stage B")]
    QUIET, THRESHOLD, MANUAL, RETRY = "quiet", "threshold", "manual", "retry"
    TRIGGERS = [(t, t) for t in (QUIET, THRESHOLD, MANUAL, RETRY)]
    RUNNING, DONE, FAILED, SKIPPED = "running", "done", "failed", "skipped"
    # deferred: the model server did not answer; the run stopped where it was and runs again
    # later with the same input (knowledge.llm.outage). Not a failure: no back-off, no smaller batch.
    DEFERRED = "deferred"
    STATES = [(s, s) for s in (RUNNING, DONE, FAILED, SKIPPED, DEFERRED)]

    stage = models.CharField(max_length=1, choices=STAGES)
    channel = models.ForeignKey(
        "knowledge.Channel", null=True, blank=True, on_delete=models.CASCADE, related_name="dreaming_runs"
    )
    agent = models.ForeignKey(
        "knowledge.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="dreaming_runs"
    )
    trigger = models.CharField(max_length=10, choices=TRIGGERS)
    state = models.CharField(max_length=10, choices=STATES, default=RUNNING)
    batches = models.PositiveIntegerField(default=0)  # batches written
    model_calls = models.PositiveIntegerField(default=0)
    messages = models.PositiveIntegerField(default=0)  # messages now in an episode
    noise = models.PositiveIntegerField(default=0)
    episodes = models.PositiveIntegerField(default=0)
    left = models.PositiveIntegerField(default=0)  # messages of an unfinished topic, left for later
    # Stage B: what the scan read, what was applied, and every operation dropped with its reason.
    materials = models.PositiveIntegerField(default=0)  # episodes, task outcomes and materials scanned
    operations = models.PositiveIntegerField(default=0)  # knowledge operations applied
    skill_updates = models.PositiveIntegerField(default=0)  # overlay lessons added or revised
    dropped = models.JSONField(default=list, blank=True)  # [{"op": n, "kind": ..., "reason": ...}]
    usage_ids = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)
    started_by = models.CharField(max_length=200, blank=True)  # "<kind>:<name>" of a manual run
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["channel", "-started_at"], name="dreamingrun_channel_started"),
            models.Index(fields=["agent", "-started_at"], name="dreamingrun_agent_started"),
        ]
        constraints = [
            models.CheckConstraint(
                name="dreamingrun_stage_subject",
                condition=models.Q(stage="a", channel__isnull=False)
                | models.Q(stage="b", agent__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return f"dreaming run {self.pk} (stage {self.stage}, {self.state})"


class RunCursor(models.Model):
    """What a Dreaming cursor holds besides its position: the run that claimed it (`run`, set with
    `claimed_at` by a conditional update, so of two workers one wins), the last run that ended,
    `failures` in a row and `retry_at`, when the next attempt may start (curation.dreaming.runs)."""

    run = models.ForeignKey(DreamingRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_run = models.ForeignKey(
        DreamingRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    failures = models.PositiveIntegerField(default=0)
    retry_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class StageACursor(RunCursor):
    """Where stage A stands in one channel: every message at or before (`message_ts`,
    `message_id`) — the order messages are read in — is in an episode or was declared noise.
    `seen_id` is the newest message id the last written batch looked at, so a topic left
    unfinished is read again only once something new arrives (or on a manual run). Claimed for
    one run like every RunCursor."""

    channel = models.OneToOneField(
        "knowledge.Channel", primary_key=True, on_delete=models.CASCADE, related_name="stage_a_cursor"
    )
    message_ts = models.DateTimeField(null=True, blank=True)
    message_id = models.BigIntegerField(null=True, blank=True)
    seen_id = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"stage A cursor of channel {self.channel_id} at message {self.message_id}"


class StageBCursor(RunCursor):
    """Where stage B stands for one agent: every episode up to `episode_id` and every task outcome
    up to `outcome_id` (ids only grow) was read by a run that committed. Claimed for one run like
    every RunCursor."""

    agent = models.OneToOneField(
        "knowledge.Agent", primary_key=True, on_delete=models.CASCADE, related_name="stage_b_cursor"
    )
    episode_id = models.BigIntegerField(default=0)
    outcome_id = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"stage B cursor of agent {self.agent_id} at episode {self.episode_id}"
