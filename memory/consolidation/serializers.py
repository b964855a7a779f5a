"""Input and output serializers of the consolidation API. They parse and render; the services decide."""

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from knowledge import names
from knowledge.access import parse_scope
from knowledge.errors import Invalid
from knowledge.web import StrictSerializer
from memory.consolidation import (
    plan_detail,
)
from memory.models import ConsolidationGroup, ConsolidationPlan


class PlanSerializer(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)

    class Meta:
        model = ConsolidationPlan
        fields = [
            "id",
            "state",
            "mode",
            "owner",
            "store",
            "created_by",
            "created_at",
            "finished_at",
            "applied_by",
            "applied_at",
            "reverted_by",
            "reverted_at",
            "counts",
            "model_note",
            "error",
        ]


class MemoryStateSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["fold", "keep", "merged"])
    text = serializers.CharField()
    status = serializers.CharField()
    category = serializers.CharField(allow_blank=True)
    confidence = serializers.FloatField()
    created_at = serializers.CharField()
    sources = serializers.ListField(child=serializers.CharField())
    into = serializers.IntegerField(required=False, help_text="The memory a folded one was folded into.")


class GroupSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=[k for k, _ in ConsolidationGroup.KINDS])
    owner = serializers.CharField()
    store = serializers.CharField()
    category = serializers.CharField(allow_blank=True)
    key = serializers.CharField(allow_blank=True)
    target = serializers.IntegerField(
        help_text="The memory that carries on: kept, winner, merged or summary."
    )
    merged_text = serializers.CharField(allow_blank=True, help_text="The model's merged or summary text.")
    reason = serializers.CharField(allow_blank=True)
    data = serializers.DictField(
        help_text="What the change adds besides memories: a promotion's new sources, a link group's "
        "[neighbour id, similarity] pairs."
    )
    before = MemoryStateSerializer(many=True)
    after = MemoryStateSerializer(many=True)


class PlanDetailSerializer(PlanSerializer):
    groups = serializers.SerializerMethodField()

    class Meta(PlanSerializer.Meta):
        fields = [*PlanSerializer.Meta.fields, "groups"]

    @extend_schema_field(GroupSerializer(many=True))
    def get_groups(self, plan) -> list[dict]:
        return GroupSerializer(plan_detail(plan), many=True).data


class RunInputSerializer(StrictSerializer):
    owner = serializers.CharField(required=False, help_text="Only this agent's memories.")
    scope = serializers.CharField(
        required=False,
        help_text="Only this store: agent, shared, workspace, private:<person>, channel:<channel>.",
    )

    def validate_owner(self, value):
        # The name is resolved by the access layer; an unknown one is this field's error, beside
        # the other fields' errors.
        try:
            return names.scope_for(self.context["principal"], agent=value, agent_field="owner").agent
        except Invalid as exc:
            raise serializers.ValidationError(exc.fields["owner"]) from None

    def validate_scope(self, value):
        try:
            return parse_scope(value)
        except Invalid as exc:
            raise serializers.ValidationError(exc.detail["scope"])


class DiscardInputSerializer(StrictSerializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)


ConflictSerializer = inline_serializer(
    "PlanConflict",
    {
        "error": serializers.CharField(),
        "state": serializers.CharField(required=False),
        "changed": serializers.ListField(child=serializers.IntegerField(), required=False),
    },
)


PlanListSerializer = inline_serializer(
    "PlanList", {"count": serializers.IntegerField(), "results": PlanSerializer(many=True)}
)
