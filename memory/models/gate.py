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
    """One eval-gate verdict for one memory: every case asked without and with the memory."""

    PENDING, RUNNING = "pending", "running"
    PASS, REGRESSED, UNTESTED, ERROR = "pass", "regressed", "untested", "error"
    VERDICTS = [(v, v) for v in (PENDING, RUNNING, PASS, REGRESSED, UNTESTED, ERROR)]

    memory = models.ForeignKey("knowledge.Memory", on_delete=models.CASCADE, related_name="gate_checks")
    memory_version = models.PositiveIntegerField()
    verdict = models.CharField(max_length=10, choices=VERDICTS, default=PENDING, db_index=True)
    trigger = models.CharField(max_length=10)  # manual | shadow | enforce
    dataset = models.CharField(max_length=100, blank=True)
    regressed_cases = models.JSONField(default=list)
    results = models.JSONField(default=list)  # per case: answers without/with, pass flags, failures
    reason = models.TextField(blank=True)
    calls = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["memory", "-created_at"])]

    def __str__(self) -> str:
        return f"gate check {self.pk}: {self.verdict}"
