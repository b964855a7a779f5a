"""API for consolidation plans: run, list, read, apply, revert, discard (reviewers and admins)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from knowledge import names
from knowledge.errors import Invalid
from knowledge.llm.api import job_response
from knowledge.llm.serializers import ModelJobSerializer
from knowledge.principals.permissions import IsReviewer
from knowledge.web import limit_offset, no_body, validated
from memory.consolidation import (
    plan_apply,
    plan_discard,
    plan_list,
    plan_revert,
)
from memory.consolidation.runs import consolidation_enqueue
from memory.consolidation.serializers import (
    ConflictSerializer,
    DiscardInputSerializer,
    PlanDetailSerializer,
    PlanListSerializer,
    PlanSerializer,
    RunInputSerializer,
)
from memory.models import ConsolidationPlan


@extend_schema(
    summary="Run consolidation now",
    description=(
        "Finds duplicates, same-key conflicts, near-duplicates (merged by the light model) and "
        "summaries among active long-term memories and writes a plan, in the background (the model "
        "is never waited for inside the request): answers 202 with the job; poll "
        "`GET /api/model-jobs/{id}` until its result names the plan. BRAIN_MEMORY_CONSOLIDATION "
        "decides what happens to the plan: `propose` leaves it for review, `apply` applies it, `off` "
        "refuses (409, as does a run in progress)."
    ),
    request=RunInputSerializer,
    responses={202: ModelJobSerializer, 400: None, 409: ConflictSerializer},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
def consolidation_run_view(request):
    data = validated(RunInputSerializer, request.data, principal=request.user)
    job = consolidation_enqueue(actor=request.user, owner=data.get("owner"), store=data.get("scope", ""))
    return job_response(job)


@extend_schema(
    operation_id="memory_consolidations_list",
    summary="List consolidation plans",
    parameters=[
        OpenApiParameter("state", str, enum=[s for s, _ in ConsolidationPlan.STATES]),
        OpenApiParameter("owner", str, description="Plans of runs limited to this agent."),
        OpenApiParameter("limit", int, description="At most 200 (default 50)."),
        OpenApiParameter("offset", int),
    ],
    responses=PlanListSerializer,
)
@api_view(["GET"])
@permission_classes([IsReviewer])
def consolidation_list_view(request):
    errors = {}
    state = request.query_params.get("state", "")
    if state and state not in dict(ConsolidationPlan.STATES):
        errors["state"] = [f"Use one of {', '.join(dict(ConsolidationPlan.STATES))}."]
    owner = None
    if request.query_params.get("owner"):
        try:
            owner = names.scope_for(
                request.user, agent=request.query_params["owner"], agent_field="owner"
            ).agent
        except Invalid as exc:
            errors.update(exc.fields)
    try:
        limit, offset = limit_offset(request.query_params, default=50, most=200)
    except Invalid as exc:
        errors.update(exc.fields)
    if errors:
        raise ValidationError(errors)
    plans = plan_list(state=state, owner=owner)
    return Response(
        {"count": plans.count(), "results": PlanSerializer(plans[offset : offset + limit], many=True).data}
    )


@extend_schema(
    summary="One consolidation plan, group by group, before → after", responses=PlanDetailSerializer
)
@api_view(["GET"])
@permission_classes([IsReviewer])
def consolidation_detail_view(request, plan_id: int):
    plan = get_object_or_404(ConsolidationPlan.objects.select_related("owner"), pk=plan_id)
    return Response(PlanDetailSerializer(plan).data)


def _act(request, plan_id, action, **kwargs):
    get_object_or_404(ConsolidationPlan, pk=plan_id)
    plan = action(actor=request.user, plan_id=plan_id, **kwargs)
    return Response(PlanDetailSerializer(plan).data)


@extend_schema(
    summary="Apply a proposed plan",
    description="All or nothing; a plan is applied once (409 afterwards, or if a memory changed since it was made).",
    request=None,
    responses={200: PlanDetailSerializer, 409: ConflictSerializer},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
@no_body
def consolidation_apply_view(request, plan_id: int):
    return _act(request, plan_id, plan_apply)


@extend_schema(
    summary="Revert an applied plan exactly",
    description="Originals back to their exact before (status, text, sources); merged memories retired.",
    request=None,
    responses={200: PlanDetailSerializer, 409: ConflictSerializer},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
@no_body
def consolidation_revert_view(request, plan_id: int):
    return _act(request, plan_id, plan_revert)


@extend_schema(
    summary="Discard a proposed plan",
    description="Its merged memories leave the review queue (rejected); its memories are free for the next run.",
    request=DiscardInputSerializer,
    responses={200: PlanDetailSerializer, 409: ConflictSerializer},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
def consolidation_discard_view(request, plan_id: int):
    data = DiscardInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    return _act(request, plan_id, plan_discard, reason=data.validated_data.get("reason", ""))
