"""API for eval datasets and the eval gate."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response

from knowledge.llm.api import job_response
from knowledge.llm.serializers import ModelJobSerializer
from knowledge.models import Memory
from knowledge.principals.permissions import IsAdmin, IsReviewer
from knowledge.web import no_body
from memory.gate import datasets as eval_datasets
from memory.gate.serializers import (
    EvalDatasetIn,
    EvalDatasetReplaceIn,
    EvalDatasetSerializer,
    GateCheckPage,
    check_out,
    dataset_out,
)
from memory.gate.services import gate_check_queue
from memory.models import EvalDataset, GateCheck


@extend_schema(
    methods=["POST"],
    request=EvalDatasetIn,
    summary="Create an eval dataset",
    responses={201: EvalDatasetSerializer},
)
@extend_schema(
    methods=["GET"],
    summary="List eval datasets",
    operation_id="eval_datasets_list",
    responses=inline_serializer("EvalDatasetList", {"results": EvalDatasetSerializer(many=True)}),
)
@api_view(["GET", "POST"])
@permission_classes([IsAdmin])
def datasets(request):
    if request.method == "GET":
        return Response({"results": [dataset_out(d) for d in EvalDataset.objects.all()]})
    body = EvalDatasetIn(data=request.data)
    body.is_valid(raise_exception=True)
    dataset = eval_datasets.dataset_create(actor=request.user, **body.validated_data)
    return Response(dataset_out(dataset), status=status.HTTP_201_CREATED)


@extend_schema(
    methods=["PUT"],
    request=EvalDatasetReplaceIn,
    summary="Replace an eval dataset's cases",
    responses=EvalDatasetSerializer,
)
@extend_schema(methods=["GET"], summary="One eval dataset", responses=EvalDatasetSerializer)
@extend_schema(methods=["DELETE"], summary="Delete an eval dataset", request=None, responses={204: None})
@api_view(["GET", "PUT", "DELETE"])
@permission_classes([IsAdmin])
def dataset_detail(request, name):
    dataset = eval_datasets.dataset_named(name)
    if request.method == "GET":
        return Response(dataset_out(dataset))
    if request.method == "DELETE":
        eval_datasets.dataset_delete(actor=request.user, dataset=dataset)
        return Response(status=status.HTTP_204_NO_CONTENT)
    body = EvalDatasetReplaceIn(data=request.data)
    body.is_valid(raise_exception=True)
    v = body.validated_data
    if v.get("name", name) != name:
        raise ValidationError({"name": ["A dataset cannot be renamed; create a new one."]})
    dataset = eval_datasets.dataset_replace(
        actor=request.user,
        dataset=dataset,
        kind=v.get("kind", dataset.kind),
        cases=v["cases"],
        expected_version=v.get("version"),
    )
    return Response(dataset_out(dataset))


@extend_schema(
    operation_id="memory_gate_check",
    summary="Check one memory with the eval gate (in the background)",
    description=(
        "Queues a check of the memory as it is now and answers 202 at once with the job; poll "
        "`GET /api/model-jobs/{id}` until its result names the check and its verdict (also listed "
        "by `GET /api/memory-gate/checks?memory=…`). A check records a verdict and changes "
        "nothing else. Verdicts: pass, regressed, untested (no gate cases), unchecked (the model "
        "gave no usable answer: never a regression); while the model server does not answer "
        "the check stays pending and the sweep asks again."
    ),
    request=None,
    responses={202: ModelJobSerializer, 404: None},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
@no_body
def gate_check(request, memory_id):
    memory = get_object_or_404(Memory.objects.select_related("owner"), pk=memory_id)
    _, job = gate_check_queue(actor=request.user, memory=memory)
    return job_response(job)


@extend_schema(
    summary="Gate verdicts",
    parameters=[
        OpenApiParameter("verdict", str, enum=[v for v, _ in GateCheck.VERDICTS]),
        OpenApiParameter("memory", int),
        OpenApiParameter("limit", int),
        OpenApiParameter("offset", int),
    ],
    responses=GateCheckPage,
)
@api_view(["GET"])
@permission_classes([IsReviewer])
def gate_checks(request):
    checks = GateCheck.objects.all()
    verdict = request.query_params.get("verdict")
    if verdict:
        if verdict not in dict(GateCheck.VERDICTS):
            raise ValidationError({"verdict": [f"One of {', '.join(dict(GateCheck.VERDICTS))}."]})
        checks = checks.filter(verdict=verdict)
    memory = request.query_params.get("memory")
    if memory:
        if not memory.isdigit():
            raise ValidationError({"memory": ["Must be a memory id."]})
        checks = checks.filter(memory_id=int(memory))
    paginator = LimitOffsetPagination()
    page = paginator.paginate_queryset(checks, request)
    return paginator.get_paginated_response([check_out(c) for c in page])
