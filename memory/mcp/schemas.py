"""Tool schemas from the API's OpenAPI document: a tool's input is the request body (and the
path and query parameters) of the operation it mirrors, its output that operation's success
response. Built once per process, on first use (generating the document takes about a second)."""

import copy
import functools
import re
from typing import Any


@functools.cache
def openapi() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def _strict_doc() -> str:
    import inspect

    from knowledge.web import StrictSerializer

    return inspect.cleandoc(StrictSerializer.__doc__ or "")


def _inline(node: Any, components: dict, depth: int = 0) -> Any:
    """The schema with every `$ref` replaced by the component it names (MCP clients expect
    self-contained schemas)."""
    if depth > 30:
        return {}
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            return _inline(components.get(name, {}), components, depth + 1)
        out = {k: _inline(v, components, depth + 1) for k, v in node.items() if k != "nullable"}
        if out.get("description") == _strict_doc():  # the base class's docstring says nothing here
            del out["description"]
        if node.get("nullable"):  # OpenAPI 3.0's nullable is JSON Schema's null type
            if isinstance(out.get("type"), str):
                out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
            if "type" not in out and "enum" not in out:
                out = {"anyOf": [out, {"type": "null"}]}
        return out
    if isinstance(node, list):
        return [_inline(v, components, depth + 1) for v in node]
    return node


def _shape(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path)


def _operation(method: str, path: str) -> dict:
    """The operation by method and path; path parameters match whatever they are named."""
    doc = openapi()
    operation = next(
        (ops.get(method.lower()) for p, ops in doc["paths"].items() if _shape(p) == _shape(path)), None
    )
    if operation is None:
        raise LookupError(f"The API has no operation {method} {path}.")
    return operation


def _as_object(schema: dict) -> dict:
    """MCP wants an object at the root; a oneOf of objects becomes an object with anyOf."""
    if schema.get("type") == "object":
        return schema
    variants = schema.get("oneOf") or schema.get("anyOf")
    if variants:
        return {"type": "object", "anyOf": variants}
    return {"type": "object", "additionalProperties": True}


def _batch(body: dict, key: str) -> dict:
    """The batch form of a body that takes one item or {key: [items]}: the variant with `key`
    when the schema gives both, else a list of the one-item schema."""
    variants = body.get("oneOf") or body.get("anyOf") or [body]
    found = next((v for v in variants if key in v.get("properties", {})), None)
    if found is not None:
        return found
    return {
        "type": "object",
        "properties": {key: {"type": "array", "items": variants[0], "minItems": 1}},
        "required": [key],
    }


def input_schema(
    method: str, path: str, *, implied: tuple[str, ...], renamed: dict[str, str], batch: str | None = None
) -> dict:
    """The operation's body fields plus its path and query parameters (renamed as the tool names
    them), minus the `implied` ones the server fills from the token; unknown fields are refused.
    With `batch`, the body is the batch form ({batch: [items]})."""
    components = openapi()["components"]["schemas"]
    operation = _operation(method, path)
    properties: dict[str, Any] = {}
    required: list[str] = []
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body:
        body = _inline(body, components)
        if batch:
            body = _batch(body, batch)
        properties.update(body.get("properties", {}))
        required.extend(body.get("required", []))
    for parameter in operation.get("parameters", []):
        if parameter.get("in") not in ("path", "query"):
            continue
        name = renamed.get(parameter["name"], parameter["name"])
        schema = copy.deepcopy(_inline(parameter.get("schema", {}), components))
        if parameter.get("description"):
            schema.setdefault("description", parameter["description"])
        properties[name] = schema
        if parameter.get("required"):
            required.append(name)
    for name in implied:
        properties.pop(name, None)
    required = [name for name in dict.fromkeys(required) if name not in implied]
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def output_schema(method: str, path: str, *, batch: str | None = None) -> dict:
    """The schema of the operation's first 2xx JSON response (with `batch`, its batch form)."""
    components = openapi()["components"]["schemas"]
    operation = _operation(method, path)
    for code in sorted(operation.get("responses", {})):
        if code.startswith("2"):
            content = operation["responses"][code].get("content", {}).get("application/json")
            if content and "schema" in content:
                schema = _inline(content["schema"], components)
                if batch:
                    variants = schema.get("oneOf") or schema.get("anyOf") or [schema]
                    schema = next((v for v in variants if batch in v.get("properties", {})), schema)
                return _as_object(schema)
    return {"type": "object", "additionalProperties": True}


def description(method: str, path: str) -> str:
    operation = _operation(method, path)
    return "\n\n".join(p for p in (operation.get("summary"), operation.get("description")) if p)
