"""A reviewer's word on a hint the review queue showed for a pair of memories."""

from django.db import models


class HintVerdict(models.Model):
    """What a reviewer said of one hint the queue showed — a duplicate or a contradiction the
    relation finder, the exact-text rule or the vectors found between two memories: `unrelated`
    (dismissed: the pair is not flagged again, anywhere the queue or an approval reads hints) or
    `confirmed` (acted on: rejected as that duplicate, or the contradiction decided). One row
    per pair, `low` < `high`, the latest word kept; counted per hint and verdict, the hints'
    precision as reviewers see it (memory.lifecycle.hints.hint_verdict_counts)."""

    UNRELATED, CONFIRMED = "unrelated", "confirmed"
    VERDICTS = [(v, v) for v in (UNRELATED, CONFIRMED)]
    DUPLICATE, EXACT, NEAR, CONTRADICTION = "duplicate", "exact-duplicate", "near-duplicate", "contradiction"
    HINTS = [(h, h) for h in (DUPLICATE, EXACT, NEAR, CONTRADICTION)]

    low = models.ForeignKey("knowledge.Memory", on_delete=models.CASCADE, related_name="+")
    high = models.ForeignKey("knowledge.Memory", on_delete=models.CASCADE, related_name="+")
    hint = models.CharField(max_length=20, choices=HINTS)
    verdict = models.CharField(max_length=12, choices=VERDICTS)
    actor_kind = models.CharField(max_length=20)
    actor_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["low", "high"], name="hint_verdict_once_per_pair"),
            models.CheckConstraint(
                name="hint_verdict_ordered_pair", condition=models.Q(low__lt=models.F("high"))
            ),
        ]
        indexes = [models.Index(fields=["high"])]
