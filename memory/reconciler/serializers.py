"""The shape of a reconciler run, as the reconciler API answers it."""

from rest_framework import serializers

from memory.consolidation.serializers import ConflictSerializer  # noqa: F401  (a reconcile's 409 is a plan's)
from memory.models import ReconcilerRun


class ReconcilerRunSerializer(serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="name", read_only=True)
    plan_state = serializers.SerializerMethodField(help_text="The state of the run's plan (its change set).")

    class Meta:
        model = ReconcilerRun
        fields = [
            "id",
            "agent",
            "trigger",
            "state",
            "plan",
            "plan_state",
            "counts",
            "note",
            "turns",
            "started_at",
            "finished_at",
        ]

    def get_plan_state(self, run) -> str | None:
        return run.plan.state if run.plan_id else None
