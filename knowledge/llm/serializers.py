"""The shape of a queued model-backed run, as every `POST …/run` answers it."""

from rest_framework import serializers

from knowledge.models import ModelJob


class ModelJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    title = serializers.CharField()
    state = serializers.ChoiceField(choices=[s for s, _ in ModelJob.STATES])
    args = serializers.JSONField()
    result = serializers.JSONField(help_text="What the run made, once done (run, plan or reconciler run id).")
    error = serializers.CharField()
    requested_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField()
