"""API views for principals: who am I."""

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from knowledge.principals.serializers import (
    MeSerializer,
)


@extend_schema(responses=MeSerializer, summary="Who this token belongs to")
@api_view(["GET"])
def me(request):
    return Response(request.user.as_dict())
