from django.db import models


class Setting(models.Model):
    """A run-time override of one of the mode settings (see knowledge.settings_store)."""

    name = models.CharField(max_length=64, unique=True)
    value = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)


class Heartbeat(models.Model):
    """The worker beats every minute; /healthz reports the age of the last beat."""

    name = models.CharField(max_length=32, unique=True)
    beat_at = models.DateTimeField()
