"""The schema a job sends to the server, derived from the schema its module keeps with its prompt.

A job's own schema (kept with its prompt, versioned with it) states everything a reply must be,
bounds included; `parse_structured` validates every reply against it. What goes over the wire
as `response_format: {"type": "json_schema", "strict": true}` is the portable subset that
OpenAI's strict mode and the grammar converters of vLLM and llama.cpp all accept:

- every object lists all its properties in `required` and has `additionalProperties: false`;
  a property the job's schema leaves optional becomes nullable (`null` means "not given", and
  `strip_nulls` removes it again before validation): `anyOf: [X, {"type": "null"}]` where X has
  items, properties or an enum (llama.cpp's converter drops them from `[X, "null"]`);
- no string or array bounds (`maxLength`, `minLength`, `maxItems`, `minimum`, …): llama.cpp
  turns each into a repetition in its grammar, and 2000 characters × 20 items gave a grammar
  over its limits that stopped the server; the bounds stay in the job's schema and are checked
  in code after the reply arrives;
- no patterns: llama.cpp's converter refuses an unanchored one (the usual "not blank", `\\S`)
  and supports only part of regex syntax inside an anchored one, so patterns stay in the job's
  schema and are checked in code;
- a free-form object (no `properties`) is not portable: a job must not use one."""

import copy
from typing import Any

# Keywords that may appear in a wire schema. Anything else is dropped by `portable` (and
# `portable_problems` names it, for the test that walks every job's schema).
WIRE_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "description",
    "anyOf",
}
DROPPED_BOUNDS = {
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "uniqueItems",
    "pattern",
}


# What a grammar converter must keep of a nullable node. llama-cpp-python's converter drops
# `items`, `properties` and `enum` of a node typed `[X, "null"]` (materials came back as
# `sources: ["1"]`), and keeps them inside `anyOf: [X, {"type": "null"}]`.
STRUCTURE = ("items", "properties", "enum")


def _nullable(node: dict) -> dict:
    """`node`, also allowing null: a plain scalar as `[type, "null"]`, anything with structure as
    `anyOf` (see STRUCTURE)."""
    if "anyOf" in node:
        options = node["anyOf"]
        return node if {"type": "null"} in options else {**node, "anyOf": [*options, {"type": "null"}]}
    kind = node.get("type")
    kinds = [] if kind is None else kind if isinstance(kind, list) else [kind]
    if "null" in kinds:
        return node
    if kind is None or any(key in node for key in STRUCTURE):
        return {"anyOf": [node, {"type": "null"}]}
    return {**node, "type": [*kinds, "null"]}


def _structured_null(node: dict) -> dict:
    """A job schema's own `[X, "null"]` on a node with structure, in the form converters keep."""
    kind = node.get("type")
    if not (isinstance(kind, list) and "null" in kind and any(key in node for key in STRUCTURE)):
        return node
    rest = [k for k in kind if k != "null"]
    inner = {**node, "type": rest[0] if len(rest) == 1 else rest}
    return {"anyOf": [inner, {"type": "null"}]}


def portable(schema: dict) -> dict:
    """The wire form of a job's schema (see the module)."""
    return _walk(copy.deepcopy(schema))


def _walk(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in DROPPED_BOUNDS or key not in WIRE_KEYWORDS:
            continue
        if key == "items":
            out[key] = _walk(value)
        elif key == "anyOf":
            out[key] = [_walk(v) for v in value]
        elif key != "properties":
            out[key] = value
    if "properties" in node:
        required = set(node.get("required", []))
        props = {}
        for name, sub in node["properties"].items():
            sub = _walk(sub)
            props[name] = sub if name in required else _nullable(sub)
        out["properties"] = props
        out["required"] = list(props)
        out["additionalProperties"] = False
    return _structured_null(out)


def strip_nulls(data: Any, schema: dict) -> Any:
    """Undo `portable`'s nullability: drop an object's `null` values where the job's schema
    has that property optional (it was not given)."""
    if isinstance(data, dict) and isinstance(schema.get("properties"), dict):
        required = set(schema.get("required", []))
        out = {}
        for key, value in data.items():
            sub = schema["properties"].get(key)
            if value is None and key not in required and sub is not None:
                continue
            out[key] = strip_nulls(value, sub) if isinstance(sub, dict) else value
        return out
    if isinstance(data, list) and isinstance(schema.get("items"), dict):
        return [strip_nulls(v, schema["items"]) for v in data]
    return data


def portable_problems(node: Any, where: str = "$") -> list[str]:
    """Why a wire schema is not in the portable subset ([] when it is)."""
    problems: list[str] = []
    if not isinstance(node, dict):
        return [f"{where}: not a schema object"]
    for key in node:
        if key not in WIRE_KEYWORDS:
            problems.append(f"{where}: keyword {key!r} is not portable")
    kinds = node.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "object" in kinds:
        props = node.get("properties")
        if not isinstance(props, dict):
            problems.append(f"{where}: a free-form object (no properties)")
        else:
            if sorted(node.get("required", [])) != sorted(props):
                problems.append(f"{where}: not every property is required")
            if node.get("additionalProperties") is not False:
                problems.append(f"{where}: additionalProperties is not false")
            for name, sub in props.items():
                problems += portable_problems(sub, f"{where}.{name}")
    if "array" in kinds:
        if not isinstance(node.get("items"), dict):
            problems.append(f"{where}: an array without items")
        else:
            problems += portable_problems(node["items"], f"{where}[]")
    for n, sub in enumerate(node.get("anyOf", [])):
        problems += portable_problems(sub, f"{where}|{n}")
    if "type" not in node and "enum" not in node and "anyOf" not in node:
        problems.append(f"{where}: no type")
    return problems


FALLBACK = {"json_schema": "json_object_schema", "json_object_schema": "json_object"}


def response_format(name: str, schema: dict, mode: str) -> dict:
    """The request's `response_format` for a job's schema in `mode`: json_schema (OpenAI's
    strict structured output, vLLM), json_object_schema (llama-cpp-python's server, which
    refuses json_schema with a 500 but turns `{"type": "json_object", "schema": …}` into a
    grammar), json_object (JSON, shape unchecked by the server)."""
    if mode == "json_object":
        return {"type": "json_object"}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": portable(schema)}
    safe = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:64] or "reply"
    return {"type": "json_schema", "json_schema": {"name": safe, "schema": portable(schema), "strict": True}}
