"""Tool schemas from the API's OpenAPI document: a tool's input is the request body (and the
path and query parameters) of the operation it mirrors, its output that operation's success
response. Built once per process, on first use (generating the document takes about a second).

The schemas are rewritten for portability (the OpenAPI document itself is left as it is): a
nullable field is `anyOf` a single-typed branch and `null` — never a `type` array, which hosts
that map tool schemas onto a dialect with one `type` a schema reject — and a
schema that constrains nothing (drf-spectacular's `{}` for free JSON) names the JSON types it
accepts. Every output schema has an optional `error` member: a refused call's structured content
is `{"error": {...}}` and validates against the tool's output schema like a result does."""

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
            out = _or_null(out)
        return out
    if isinstance(node, list):
        return [_inline(v, components, depth + 1) for v in node]
    return node


# What a field of free JSON accepts, spelt with one `type` a branch.
JSON_TYPES = ("object", "array", "string", "number", "boolean", "null")
# Keywords that outlive the split into branches: they describe the field, not one of its types.
ANNOTATIONS = ("description", "title", "default", "examples", "readOnly", "writeOnly", "deprecated")
CONSTRAINING = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "properties", "items"}


def _any(annotations: dict | None = None) -> dict:
    out: dict[str, Any] = {"anyOf": [{"type": t} for t in JSON_TYPES]}
    out.update(annotations or {})
    return out


def _or_null(schema: dict) -> dict:
    """`schema` or null, as anyOf branches each with a single type."""
    notes = {k: schema[k] for k in ANNOTATIONS if k in schema}
    rest = {k: v for k, v in schema.items() if k not in ANNOTATIONS}
    if not rest.keys() & CONSTRAINING:
        return _any(notes)  # free JSON, null included
    if "enum" in rest:
        rest["enum"] = [v for v in rest["enum"] if v is not None]
    branches = rest["anyOf"] if set(rest) == {"anyOf"} else [rest]
    if {"type": "null"} not in branches:
        branches = [*branches, {"type": "null"}]
    return {"anyOf": branches, **notes}


def portable(schema: Any) -> Any:
    """The schema with no `type` arrays and no schema that constrains nothing (see the module's
    docstring), walking only the places that hold schemas."""
    if not isinstance(schema, dict):
        return schema  # `true`/`false` are schemas too, and portable as they are
    out = dict(schema)
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: portable(v) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = portable(out[key])
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [portable(v) for v in out[key]]
    kind = out.get("type")
    if isinstance(kind, list):
        notes = {k: out.pop(k) for k in ANNOTATIONS if k in out}
        out.pop("type")
        branches = [{"type": t, **(out if t != "null" else {})} for t in kind]
        return {"anyOf": branches, **notes}
    if not out.keys() & CONSTRAINING:
        return _any({k: out[k] for k in ANNOTATIONS if k in out})
    return out


ERROR = {
    "type": "object",
    "description": "Set, instead of the result, when the call was refused (nothing was written): the "
    "REST API's error — its HTTP status, its message, and for invalid arguments the messages of "
    "each field.",
    "properties": {
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "message": {"type": "string", "minLength": 1},
        "fields": {"type": "object", "additionalProperties": True},
    },
    "required": ["status", "message"],
    "additionalProperties": True,
}


def with_error(schema: dict) -> dict:
    """The output schema with the optional `error` member: a result validates as before, and so
    does `{"error": {...}}` alone (the result's required members are required only without it)."""
    out = copy.deepcopy(schema)
    if "properties" in out or "anyOf" not in out:
        if "error" in out.get("properties", {}):
            raise LookupError("An output schema already has an `error` member.")
        out.setdefault("properties", {})["error"] = ERROR
        required = out.pop("required", None)
        if required:
            out["anyOf"] = [{"required": required}, {"required": ["error"]}]
        return out
    refusal = {"type": "object", "properties": {"error": ERROR}, "required": ["error"]}
    out["anyOf"] = [*out["anyOf"], refusal]
    return out


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
    method: str,
    path: str,
    *,
    implied: tuple[str, ...],
    renamed: dict[str, str],
    batch: str | None = None,
    extra: dict | None = None,
    optional: tuple[str, ...] = (),
) -> dict:
    """The operation's body fields plus its path and query parameters (renamed as the tool names
    them), minus the `implied` ones the server fills from the token; unknown fields are refused.
    With `batch`, the body is the batch form ({batch: [items]}); `extra` properties are the
    tool's own (a file inline where REST takes multipart), `optional` ones not required here."""
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
    properties.update(extra or {})
    for name in implied:
        properties.pop(name, None)
    required = [name for name in dict.fromkeys(required) if name not in implied and name not in optional]
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return portable(out)


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
                return with_error(portable(_as_object(schema)))
    return with_error({"type": "object", "additionalProperties": True})


def description(method: str, path: str) -> str:
    operation = _operation(method, path)
    return "\n\n".join(p for p in (operation.get("summary"), operation.get("description")) if p)
