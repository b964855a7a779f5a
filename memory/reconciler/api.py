"""API: run the reconciler over one agent now (reviewers and admins)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge.models import Agent
from knowledge.principals.permissions import IsReviewer
from knowledge.web import no_body
from memory.consolidation import PlanConflict
from memory.consolidation.api import ConflictSerializer, _conflict
from memory.reconciler.models import ReconcilerRun
from memory.reconciler.services import reconciler_run


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


@extend_schema(
    operation_id="agent_reconcile",
    summary="Reconcile one agent's memory now",
    description=(
        "Vector dedup, same-key conflicts, promotion, session digests and links over the agent's "
        "memories, written as one consolidation plan. BRAIN_MEMORY_CONSOLIDATION decides what "
        "happens to it: `propose` leaves it for review, `apply` applies it, `off` refuses (409); "
        "another plan running is also 409."
    ),
    request=None,
    responses={201: ReconcilerRunSerializer, 400: None, 404: None, 409: ConflictSerializer},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
@no_body
def reconcile_view(request, agent: str):
    owner = get_object_or_404(Agent, name=agent)
    try:
        run = reconciler_run(actor=request.user, agent=owner, trigger=ReconcilerRun.MANUAL)
    except PlanConflict as exc:
        return _conflict(exc)
    return Response(ReconcilerRunSerializer(run).data, status=status.HTTP_201_CREATED)
