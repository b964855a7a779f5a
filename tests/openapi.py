"""The generated OpenAPI schema, read strictly: the response schemas of /api/schema/ as JSON
schemas in which every object that lists its properties may hold no others."""

import copy
import functools

import jsonschema
from drf_spectacular.generators import SchemaGenerator


@functools.cache
def api_spec() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def strict(node):
    """An OpenAPI 3.0 schema as a strict JSON schema: `nullable` becomes a null type, and objects
    with declared properties refuse undeclared ones."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: strict(v) for k, v in node.items()}
    if node.pop("nullable", False):
        if "type" in node:
            node["type"] = [node["type"], "null"]
        else:
            node = {"anyOf": [node, {"type": "null"}]}
    if node.get("type") in ("object", ["object", "null"]) and "properties" in node:
        node.setdefault("additionalProperties", False)
    return node


@functools.cache
def _strict_components() -> dict:
    return strict(copy.deepcopy(api_spec()["components"]))


def validate(schema: dict, instance) -> None:
    """Raise jsonschema.ValidationError unless `instance` matches `schema` (a schema of the API
    spec, `$ref`s into its components), strictly."""
    root = {**strict(copy.deepcopy(schema)), "components": _strict_components()}
    jsonschema.validate(instance, root)


def response_schema(path: str, method: str, status: int) -> dict | None:
    """The documented JSON body of one answer (None when it has none, or the method is not one
    the path documents)."""
    operation = api_spec()["paths"].get(path, {}).get(method.lower(), {})
    response = operation.get("responses", {}).get(str(status), {})
    return response.get("content", {}).get("application/json", {}).get("schema")


def request_schema(path: str, method: str) -> dict:
    return api_spec()["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]["schema"]
