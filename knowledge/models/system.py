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


class AuthFailure(models.Model):
    """Bad API tokens from one client address in one minute (knowledge.throttle)."""

    address = models.CharField(max_length=64)
    time_window = models.BigIntegerField()  # epoch minute
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["address", "time_window"], name="authfailure_address_window")
        ]
