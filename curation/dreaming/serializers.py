"""Input and output serializers of the Dreaming API. They parse and render; the services decide."""

from rest_framework import serializers

from curation.models import DreamingRun
from knowledge.web import StrictSerializer


class StageBRunInput(StrictSerializer):
    agent = serializers.SlugField(help_text="The agent's name.")


class StageARunInput(StrictSerializer):
    channel = serializers.SlugField(help_text="The channel's name.")


class DreamingRunSerializer(serializers.ModelSerializer):
    channel = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    agent = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    # Plain strings in the schema: as enums they would collide with other components' `state`
    # enums and rename those (drf-spectacular names colliding enums by hash).
    stage = serializers.CharField(read_only=True, help_text="a | b")
    trigger = serializers.CharField(read_only=True, help_text="quiet | threshold | manual | retry")
    state = serializers.CharField(read_only=True, help_text="running | done | failed | skipped")

    class Meta:
        model = DreamingRun
        fields = [
            "id",
            "stage",
            "channel",
            "agent",
            "trigger",
            "state",
            "reason",
            "batches",
            "model_calls",
            "messages",
            "noise",
            "episodes",
            "left",
            "materials",
            "operations",
            "skill_updates",
            "dropped",
            "usage_ids",
            "started_by",
            "started_at",
            "finished_at",
        ]
