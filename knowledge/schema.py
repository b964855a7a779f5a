"""OpenAPI: describe Brain's bearer-token authentication and its JSON errors to drf-spectacular."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import AllowAny, IsAuthenticated


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "knowledge.principals.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An agent, person or integration token."}


class ApiErrorSerializer(serializers.Serializer):
    """The body of every API error (`knowledge.web`); some errors add fields of their own
    (a conflict names what it conflicts with)."""

    error = serializers.CharField(help_text='What went wrong; "invalid" for a body or parameter that failed.')
    fields = serializers.DictField(
        required=False,
        help_text="With error=invalid: the messages for each field (a list of texts, or for a nested "
        "field its own fields, or for a list of objects the fields of each, by index).",
    )
    max_body_bytes = serializers.IntegerField(
        required=False, help_text="With 413: the largest body accepted."
    )


def error_response(description: str) -> OpenApiResponse:
    """An error answer of one operation, in the shape of every API error."""
    return OpenApiResponse(ApiErrorSerializer, description=description)


ERROR_DESCRIPTIONS = {
    "400": "Invalid body or parameters; nothing was written.",
    "401": "Missing, unknown or revoked token.",
    "403": "This token may not do this.",
    "404": "No such object (or none this token may see).",
    "413": "The body is larger than the server accepts (`max_body_bytes`); nothing was written.",
    "429": "Too many bad tokens from this address: wait `Retry-After` seconds.",
}


class BrainAutoSchema(AutoSchema):
    """drf-spectacular's schema, with the errors each operation can answer documented next to its
    success: 401 everywhere a token is required, 403 behind a permission narrower than "any
    token", 404 where the path names an object and 400 where the caller sends a body or query
    parameters. A view's own `responses` for a status win."""

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code in self._error_codes():
            if code not in responses:
                response = self._get_response_for_code(ApiErrorSerializer, code, direction=direction)
                response["description"] = ERROR_DESCRIPTIONS[code]
                if code == "429":
                    response["headers"] = {
                        "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}
                    }
                responses[code] = response
        return responses

    def _error_codes(self) -> list[str]:
        permissions = [type(p) for p in self.view.get_permissions()]
        codes = []
        if any(p not in (AllowAny,) for p in permissions):
            codes.extend(["401", "429"])
        if any(p not in (AllowAny, IsAuthenticated) for p in permissions):
            codes.append("403")
        params = self._get_parameters()
        if any(p["in"] == "path" for p in params):
            codes.append("404")
        body = self._get_request_body()
        if body or any(p["in"] == "query" for p in params):
            codes.append("400")
        if body:
            codes.append("413")
        return codes
