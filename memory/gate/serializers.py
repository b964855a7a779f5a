"""Input and output serializers of the gate API, and the builders of its answers."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from knowledge.web import StrictCharField, StrictSerializer
from memory.models import EvalDataset, GateCheck


class EvalDatasetIn(StrictSerializer):
    """A new eval dataset; each case is checked by memory.gate.datasets."""

    name = StrictCharField()
    kind = StrictCharField(default=EvalDataset.KIND_AGENT_TURN)
    cases = serializers.ListField(child=serializers.DictField())


class EvalDatasetReplaceIn(StrictSerializer):
    """A dataset's new cases (`version`, when given, refuses a concurrent edit)."""

    name = StrictCharField(required=False, help_text="If given, the dataset's own name.")
    kind = StrictCharField(required=False, help_text="Default: the dataset's kind.")
    cases = serializers.ListField(child=serializers.DictField())
    version = serializers.IntegerField(required=False, help_text="Expected current version.")


class EvalDatasetSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    version = serializers.IntegerField()
    cases = serializers.ListField(child=serializers.DictField())
    updated_at = serializers.DateTimeField()


class GateCheckSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    memory = serializers.IntegerField()
    memory_version = serializers.IntegerField()
    verdict = serializers.ChoiceField(choices=GateCheck.VERDICTS)
    trigger = serializers.CharField(help_text="manual, shadow or enforce.")
    dataset = serializers.CharField()
    regressed_cases = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField()
    calls = serializers.IntegerField()
    results = serializers.ListField(
        child=serializers.DictField(), help_text="Per case: answers and failures."
    )
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


GateCheckPage = inline_serializer(
    "GateCheckPage",
    {
        "count": serializers.IntegerField(),
        "next": serializers.URLField(allow_null=True),
        "previous": serializers.URLField(allow_null=True),
        "results": GateCheckSerializer(many=True),
    },
)


def dataset_out(dataset: EvalDataset) -> dict:
    return {
        "name": dataset.name,
        "kind": dataset.kind,
        "version": dataset.version,
        "cases": dataset.cases,
        "updated_at": dataset.updated_at,
    }


def check_out(check: GateCheck) -> dict:
    return {
        "id": check.pk,
        "memory": check.memory_id,
        "memory_version": check.memory_version,
        "verdict": check.verdict,
        "trigger": check.trigger,
        "dataset": check.dataset,
        "regressed_cases": check.regressed_cases,
        "reason": check.reason,
        "calls": check.calls,
        "results": check.results,
        "created_at": check.created_at,
        "finished_at": check.finished_at,
    }
