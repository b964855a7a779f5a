from django.db import models


class SourceState(models.Model):
    """The current state of an external source (ticket, KB article, structured record) as its
    owning system last pushed it (PUT/DELETE /api/sources/{kind}/{ref}), with the fingerprint of
    the fields whose change matters for its kind."""

    kind = models.CharField(max_length=16)
    ref = models.CharField(max_length=300)
    fields = models.JSONField(default=dict)
    fingerprint = models.CharField(max_length=64, blank=True)
    deleted = models.BooleanField(default=False)
    pushed_by = models.CharField(max_length=150, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "ref"], name="source_state_unique")]

    def __str__(self) -> str:
        return f"{self.kind}:{self.ref}"
