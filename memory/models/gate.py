from django.db import models


class EvalDataset(models.Model):
    """Eval cases of kind `agent_turn`. `memory-gate-<agent>` gates that agent's memories;
    `memory-gate` gates every agent without its own. Each case is
    {"id", "input": {"turn", "history": [{"role", "content"}]}, "expect": {"contains", "regex", "excludes"}}."""

    KIND_AGENT_TURN = "agent_turn"

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(
        max_length=20, default=KIND_AGENT_TURN, choices=[(KIND_AGENT_TURN, KIND_AGENT_TURN)]
    )
    cases = models.JSONField(default=list)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class GateCheck(models.Model):
    """One eval-gate verdict for one memory: every case asked without and with the memory.

    A check is queued (pending) and run by a background job (memory.gate.services); `unchecked`
    is a check the model could not answer usably (cut or empty twice, not configured, over its
    budget, or no answer through every deferral), never a regression. `error` is what such a
    check was called before it had a name of its own (older rows only). An enforcing check
    holds its memory: `activation` keeps who asked and by which route, so the job can activate
    the memory when it passes."""

    PENDING, RUNNING = "pending", "running"
    PASS, REGRESSED, UNTESTED, UNCHECKED, ERROR = "pass", "regressed", "untested", "unchecked", "error"
    VERDICTS = [(v, v) for v in (PENDING, RUNNING, PASS, REGRESSED, UNTESTED, UNCHECKED, ERROR)]
    FINISHED = (PASS, REGRESSED, UNTESTED, UNCHECKED, ERROR)

    memory = models.ForeignKey("knowledge.Memory", on_delete=models.CASCADE, related_name="gate_checks")
    memory_version = models.PositiveIntegerField()
    verdict = models.CharField(max_length=10, choices=VERDICTS, default=PENDING, db_index=True)
    trigger = models.CharField(max_length=10)  # manual | shadow | enforce
    dataset = models.CharField(max_length=100, blank=True)
    regressed_cases = models.JSONField(default=list)
    results = models.JSONField(default=list)  # per case: answers without/with, pass flags, failures
    reason = models.TextField(blank=True)
    calls = models.PositiveIntegerField(default=0)
    # enforce: {"actor": {kind, name, role}, "route", "decision", "boundary"} of the held activation
    activation = models.JSONField(default=dict, blank=True)
    deferrals = models.PositiveSmallIntegerField(default=0)  # runs put off: the model server did not answer
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)  # the running claim's time
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["memory", "-created_at"])]

    def __str__(self) -> str:
        return f"gate check {self.pk}: {self.verdict}"
