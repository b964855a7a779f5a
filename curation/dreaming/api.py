"""API for Dreaming: run stage A for one channel or stage B for one agent now (admins), list runs
(reviewers)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from curation.dreaming.runs import run_list, run_request
from curation.dreaming.serializers import (
    DreamingRunSerializer,
    StageARunInput,
    StageBRunInput,
)
from curation.models import DreamingRun
from knowledge import names
from knowledge.llm.api import job_response
from knowledge.llm.serializers import ModelJobSerializer
from knowledge.principals.permissions import IsAdmin, IsReviewer
from knowledge.schema import error_response


def _run_now(request, *, stage: str, serializer, named, field: str):
    """A manual run of `stage` for the channel or agent the request names (`named` resolves it:
    404 when there is none), through run_request."""
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    subject = named(data.validated_data[field])
    return job_response(run_request(stage=stage, of=subject, actor=request.user))


@extend_schema(
    summary="Run Dreaming stage A for one channel now",
    description=(
        "Queues a run that reads the channel's messages after its stage A cursor, batch by batch, "
        "through the light model, and saves each batch's episodes with the new cursor in one "
        "transaction. Answers 202 at once with the job (poll `GET /api/model-jobs/{id}`); its result "
        "names the run: `done`, `failed` (with the reason; nothing of the failed batch was written) "
        "or `skipped` (the model is not configured or over budget). 409 while another run reads "
        "the channel."
    ),
    request=StageARunInput,
    responses={202: ModelJobSerializer, 400: None, 404: None, 409: None},
)
@api_view(["POST"])
@permission_classes([IsAdmin])
def stage_a_run_view(request):
    return _run_now(
        request,
        stage=DreamingRun.STAGE_A,
        serializer=StageARunInput,
        named=names.channel_named,
        field="channel",
    )


@extend_schema(
    summary="List Dreaming runs",
    parameters=[
        OpenApiParameter("channel", str),
        OpenApiParameter("stage", str, enum=["a", "b"]),
        OpenApiParameter("limit", int, description="At most 200 (default 50)."),
    ],
    responses={200: DreamingRunSerializer(many=True), 404: error_response("No channel of that name.")},
)
@api_view(["GET"])
@permission_classes([IsReviewer])
def dreaming_run_list_view(request):
    channel = None
    if name := request.query_params.get("channel"):
        channel = names.channel_named(name)
    stage = request.query_params.get("stage", "")
    if stage not in ("", DreamingRun.STAGE_A, DreamingRun.STAGE_B):
        raise ValidationError({"stage": ["Choose a or b."]})
    try:
        limit = min(max(int(request.query_params.get("limit", 50)), 1), 200)
    except ValueError:
        raise ValidationError({"limit": ["A whole number is required."]}) from None
    runs = run_list(channel=channel, stage=stage, limit=limit)
    return Response(DreamingRunSerializer(runs, many=True).data)


@extend_schema(
    summary="Run Dreaming stage B (curation) for one agent now",
    description=(
        "Queues a run that scans the agent's new episodes and task outcomes and the index of its "
        "entries, opens what the model picked, and applies the proposed operations that pass the "
        "code rules — entries, blocks, relations, overlay lessons, the pinned memo, their audit "
        "events (each carrying the run id) and the agent's cursor — in one transaction. Answers "
        "202 at once with the job (poll `GET /api/model-jobs/{id}`); its result names the run: "
        "`done`, `failed` (nothing written, the cursor did not move) or `skipped` (the model is not "
        "configured or over budget). Never runs stage A. 409 while another run curates the agent."
    ),
    request=StageBRunInput,
    responses={202: ModelJobSerializer, 400: None, 404: None, 409: None},
)
@api_view(["POST"])
@permission_classes([IsAdmin])
def stage_b_run_view(request):
    return _run_now(
        request, stage=DreamingRun.STAGE_B, serializer=StageBRunInput, named=names.agent_named, field="agent"
    )
