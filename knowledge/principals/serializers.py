"""The shape of the `me` answer."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

MeSerializer = inline_serializer(
    "Me",
    {
        "kind": serializers.ChoiceField(choices=["agent", "person", "integration"]),
        "name": serializers.CharField(),
        "role": serializers.CharField(allow_null=True),
    },
)
