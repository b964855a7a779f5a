"""API views for principals: who am I."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response

MeSerializer = inline_serializer(
    "Me",
    {
        "kind": serializers.ChoiceField(choices=["agent", "person", "integration"]),
        "name": serializers.CharField(),
        "role": serializers.CharField(allow_null=True),
    },
)


@extend_schema(responses=MeSerializer, summary="Who this token belongs to")
@api_view(["GET"])
def me(request):
    return Response(request.user.as_dict())
