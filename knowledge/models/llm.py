from django.db import models


class ModelProfile(models.Model):
    """A named OpenAI-compatible chat-completions endpoint. Blank fields inherit from the default
    profile (BRAIN_MODEL_BASE_URL, BRAIN_MODEL, BRAIN_MODEL_API_KEY, BRAIN_MODEL_TIMEOUT_SECONDS,
    BRAIN_MODEL_DAILY_CALLS, BRAIN_MODEL_DAILY_TOKENS), so a `light` profile may name only a
    cheaper model on the same endpoint. The key is stored but never shown or audited."""

    name = models.SlugField(max_length=64, unique=True)
    base_url = models.URLField(max_length=300, blank=True)
    model = models.CharField(max_length=200, blank=True)
    api_key = models.CharField(max_length=500, blank=True)
    timeout_seconds = models.FloatField(null=True, blank=True)
    max_retries = models.PositiveSmallIntegerField(null=True, blank=True)
    daily_calls = models.PositiveIntegerField(null=True, blank=True)
    daily_tokens = models.PositiveIntegerField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    # The model's context window in tokens (prompt + reply); blank: what the server's /v1/models
    # says, else BRAIN_MODEL_CONTEXT_TOKENS.
    context_tokens = models.PositiveIntegerField(null=True, blank=True)
    # How structured output is asked for: json_schema (OpenAI, vLLM), json_object_schema
    # (llama-cpp-python's {"type": "json_object", "schema": …}), json_object, or auto (each in
    # that order until the server takes one; the finding is kept in ModelEndpointState). Blank:
    # the environment's.
    STRUCTURED = ["auto", "json_schema", "json_object_schema", "json_object"]
    structured_output = models.CharField(
        max_length=20, blank=True, choices=[(s, s) for s in STRUCTURED], default=""
    )
    notes = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ModelUsage(models.Model):
    """One governed model call (or a refusal to make one): who asked, for what, what it cost and
    how it ended. A `pending` row reserves budget while the call is in flight."""

    PENDING, OK, INVALID, ERROR, TIMEOUT, REFUSED = "pending", "ok", "invalid", "error", "timeout", "refused"
    CUT = "cut"  # the reply stopped at its token budget (finish_reason "length")
    OUTCOMES = [(o, o) for o in (PENDING, OK, INVALID, CUT, ERROR, TIMEOUT, REFUSED)]
    # Outcomes that count against a budget: everything that reached (or is reaching) the endpoint.
    SPENT = (PENDING, OK, INVALID, CUT, ERROR, TIMEOUT)

    created_at = models.DateTimeField(db_index=True)
    profile = models.CharField(max_length=64)
    model = models.CharField(max_length=200, blank=True)
    agent = models.ForeignKey(
        "knowledge.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="model_usage"
    )
    actor = models.CharField(max_length=160, blank=True)  # kind:name of who asked
    purpose = models.CharField(max_length=64)
    outcome = models.CharField(max_length=10, choices=OUTCOMES, default=PENDING)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    waited_ms = models.PositiveIntegerField(
        default=0
    )  # waiting for a free slot of the endpoint, before it was sent
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["profile", "created_at"]),
            models.Index(fields=["agent", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} via {self.profile}: {self.outcome}"


class ModelEndpointState(models.Model):
    """What Brain found out about a profile's endpoint, so it is found out once: whether it takes
    `json_schema` structured output, the context window its /v1/models reports, and whether it
    answered the last background check (Status shows `unreachable`)."""

    profile = models.CharField(max_length=64, unique=True)
    base_url = models.CharField(max_length=300, blank=True)  # what the findings are about
    structured_output = models.CharField(max_length=20, blank=True)  # what it takes ("" = untried)
    structured_note = models.CharField(max_length=300, blank=True)
    context_tokens = models.PositiveIntegerField(null=True, blank=True)
    # When the context was learned (from /v1/models or a 400): it holds CONTEXT_TTL, then the
    # server is asked again (a server restarted with a larger context is used as such).
    context_learned_at = models.DateTimeField(null=True, blank=True)
    reachable = models.BooleanField(null=True)
    reach_error = models.CharField(max_length=300, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.profile


class ModelJob(models.Model):
    """A model-backed run someone asked for (stage A or B now, a consolidation run, reconcile):
    queued by the request, run by a worker, so no request waits on a model. The console polls
    it; its result names what the run made (a Dreaming run, a plan, a reconciler run)."""

    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    DEFERRED = "deferred"  # the run it made waits for the model server, and goes on by itself
    STATES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED, DEFERRED)]

    kind = models.CharField(max_length=64)
    args = models.JSONField(default=dict)
    state = models.CharField(max_length=10, choices=STATES, default=QUEUED)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.CharField(max_length=160, blank=True)  # kind:name
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.state})"
