"""API: a queued model-backed run (what `POST …/run` answered with 202)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge.llm.jobs import job_public
from knowledge.llm.serializers import (
    ModelJobSerializer,
)
from knowledge.models import ModelJob
from knowledge.principals.permissions import IsReviewer
from knowledge.schema import error_response


def job_response(job: ModelJob, status: int = 202) -> Response:
    return Response(ModelJobSerializer(job_public(job)).data, status=status)


@extend_schema(
    operation_id="model_job_detail",
    summary="A queued model-backed run",
    description="Poll until `state` is `done` (see `result`) or `failed` (see `error`).",
    responses={
        200: ModelJobSerializer,
        404: error_response("No job with that id."),
    },
)
@api_view(["GET"])
@permission_classes([IsReviewer])
def model_job_view(request, job_id: int):
    return job_response(get_object_or_404(ModelJob, pk=job_id), status=200)
