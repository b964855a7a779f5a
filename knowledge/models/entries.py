from django.contrib.postgres.fields import ArrayField
from django.db import models


class Entry(models.Model):
    """One stable topic of curated knowledge. Its body blocks are Memories attached to it."""

    name = models.CharField(max_length=300)
    type = models.CharField(max_length=64, blank=True)
    aliases = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    summary = models.TextField(blank=True)
    properties = models.JSONField(default=dict, blank=True)
    store = models.CharField(max_length=120)
    owner = models.ForeignKey("knowledge.Agent", on_delete=models.PROTECT, related_name="entries")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["owner", "store"])]

    def __str__(self) -> str:
        return self.name
