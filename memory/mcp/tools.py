"""The MCP tools and resources, as plain synchronous functions of (principal, arguments).

Each tool validates its arguments with the REST operation's input serializer (a
`StrictSerializer`: unknown fields are refused) and calls the helper or service that operation's
view calls. The API names the agent in the body or the path; here the agent is always the
token's, so those fields are left out of the schema and refused when given."""

import base64
import binascii
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import close_old_connections
from django.http import Http404
from rest_framework import serializers
from rest_framework.exceptions import APIException, ValidationError

from knowledge import access, names
from knowledge.access import material_get_for
from knowledge.errors import DomainError
from knowledge.materials import services as material_services
from knowledge.materials.selectors import citing_entries, owner_for
from knowledge.materials.serializers import material_out, version_out
from knowledge.principal import Principal
from knowledge.web import StrictCharField, StrictSerializer, api_exception_handler, validated
from memory.conversations.serializers import ConversationIn, MessageBatchIn, conversation_out
from memory.conversations.services import conversation_finish, conversation_open, messages_post
from memory.lifecycle import operate, write
from memory.lifecycle.serializers import MemoryWriteSerializer, memory_out, write_route
from memory.recall.answers import browse_open, context_for, search_for
from memory.recall.memo import memo_for, memo_out
from memory.recall.serializers import BrowseIn, ContextIn, SearchIn
from memory.skills import selectors as skill_selectors
from memory.skills.answers import experience_add_for, outcome_report
from memory.skills.serializers import ExperienceIn, OutcomeIn


class ToolRefused(Exception):
    """A tool call the API would have answered with an error: `body` is the API's JSON error
    body, `status` its HTTP status. Nothing was written."""

    def __init__(self, status: int, body: dict):
        super().__init__(json.dumps(body))
        self.status = status
        self.body = body

    @property
    def message(self) -> str:
        """What a client shows: the API's message, and for invalid arguments each field's
        messages ("Invalid arguments — teir: Unknown field.")."""
        error = self.body.get("error")
        text = error if isinstance(error, str) and error else json.dumps(error)
        fields = self.body.get("fields")
        if fields:
            text = "Invalid arguments" if text == "invalid" else text
            text = f"{text} — " + "; ".join(f"{path}: {msg}" for path, msg in _field_messages(fields))
        return text

    @property
    def structured(self) -> dict:
        """The refusal as the `error` member every tool's output schema declares."""
        detail = {k: v for k, v in self.body.items() if k != "error"}
        return {"error": {"status": self.status, "message": self.message, **detail}}


def _field_messages(fields, prefix: str = ""):
    """(field path, message) pairs of a DRF error tree: `messages.0.text`."""
    if isinstance(fields, dict):
        for key, value in fields.items():
            yield from _field_messages(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(fields, list) and fields and all(isinstance(v, str) for v in fields):
        yield prefix or "arguments", " ".join(fields)
    elif isinstance(fields, list):
        for i, value in enumerate(fields):
            if value:
                yield from _field_messages(value, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix or "arguments", str(fields)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    method: str  # the REST operation whose schemas and rules the tool shares
    path: str
    run: Callable[[Principal, dict], dict]
    implied: tuple[str, ...] = ("agent",)
    renamed: dict[str, str] = field(default_factory=dict)
    read_only: bool = False
    batch: str | None = None  # the body is the batch form {batch: [items]} of a one-or-many body
    # What the tool takes beyond the operation's JSON body (a file inline, where REST sends
    # multipart): properties added to the input schema, and required fields the tool relaxes.
    extra_input: dict = field(default_factory=dict)
    optional: tuple[str, ...] = ()


# --- tools ------------------------------------------------------------------------------------


def memory_search_tool(principal: Principal, args: dict) -> dict:
    return search_for(principal, validated(SearchIn, {**args, "agent": principal.agent.name}))


def memory_write_tool(principal: Principal, args: dict) -> dict:
    data = validated(MemoryWriteSerializer, args, principal=principal)
    route = write_route(data)
    return memory_out(
        write.memory_write(
            actor=principal, request=write.WriteRequest(**names.write_named(principal, data)), route=route
        ),
        reader=principal,
    )


class RetireIn(StrictSerializer):
    memory = serializers.IntegerField(min_value=1)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


def memory_retire_tool(principal: Principal, args: dict) -> dict:
    """DELETE /api/memory/{id}: the agent's own memory leaves its recall at once (reversible)."""
    v = validated(RetireIn, args)
    memory = operate.memory_retire(actor=principal, memory_id=v["memory"], reason=v["reason"])
    return memory_out(memory, reader=principal)


def memory_browse_tool(principal: Principal, args: dict) -> dict:
    v = validated(BrowseIn, args)
    return browse_open(principal, kind=v["kind"], pk=v["id"], conversation=v.get("conversation"))


def context_compile_tool(principal: Principal, args: dict) -> dict:
    return context_for(principal, principal.agent, validated(ContextIn, args))


class ExperienceToolIn(ExperienceIn):
    skill = serializers.SlugField(max_length=64)


def experience_add_tool(principal: Principal, args: dict) -> dict:
    v = validated(ExperienceToolIn, args)
    skill = names.skill_named(v.pop("skill"))
    return experience_add_for(principal, principal.agent, skill, v)


def task_outcome_report_tool(principal: Principal, args: dict) -> dict:
    out, _created = outcome_report(principal, validated(OutcomeIn, args))
    return out


def conversation_open_tool(principal: Principal, args: dict) -> dict:
    v = validated(ConversationIn, {**args, "agent": principal.agent.name})
    return conversation_out(conversation_open(principal, v))


class FinishIn(StrictSerializer):
    conversation = serializers.IntegerField(min_value=1)


def conversation_finish_tool(principal: Principal, args: dict) -> dict:
    v = validated(FinishIn, args)
    conversation = access.conversation_get_for(principal, v["conversation"])
    return conversation_out(conversation_finish(actor=principal, conversation_id=conversation.pk))


def messages_post_tool(principal: Principal, args: dict) -> dict:
    items = validated(MessageBatchIn, args)["messages"]
    rows, result = messages_post(principal, items)
    return {
        "received": len(items),
        "stored": result.stored,
        "duplicates": result.duplicates,
        "messages": rows,
    }


class MaterialToolIn(StrictSerializer):
    """`POST /api/materials` in one JSON body: pasted `text`, web content `html`, or a file's
    bytes as `file_base64` with its `filename` (the REST API's multipart upload)."""

    title = StrictCharField(required=False, max_length=300, allow_blank=True)
    text = StrictCharField(required=False, max_length=5_000_000)
    html = StrictCharField(required=False, max_length=5_000_000)
    file_base64 = serializers.CharField(required=False, trim_whitespace=False)
    filename = serializers.CharField(required=False, max_length=255)
    scope = serializers.CharField(max_length=160, default="shared")

    def validate(self, data):
        given = [f for f in ("text", "html", "file_base64") if f in data]
        if len(given) != 1:
            raise ValidationError({"text": ["Send one of text, html or file_base64 (with filename)."]})
        if "file_base64" in data and not data.get("filename"):
            raise ValidationError({"filename": ["Name the file (its name helps judge its type)."]})
        if "file_base64" not in data and not data.get("title"):
            raise ValidationError({"title": ["Give the material a title."]})
        return data


def _decoded(encoded: str) -> bytes:
    """The file's bytes, held to BRAIN_MATERIAL_MAX_MB before decoding (the material service
    checks the decoded size again, with the API's 413)."""
    limit = material_services.max_bytes()
    if len(encoded) > math.ceil(limit / 3) * 4 + 4:
        size = len(encoded) * 3 // 4
        raise material_services.TooLarge(
            f"file_base64: the original is about {size:,} bytes; at most "
            f"{limit // (1024 * 1024)} MB (BRAIN_MATERIAL_MAX_MB) are learned.",
            max_bytes=limit,
        )
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError({"file_base64": ["Not valid base64."]}) from None


def material_add_tool(principal: Principal, args: dict) -> dict:
    v = validated(MaterialToolIn, args)
    owner = owner_for(principal, principal.agent.name)
    store = access.parse_scope(v["scope"])
    if "file_base64" in v:
        material = material_services.material_upload(
            actor=principal,
            owner=owner,
            store=store,
            filename=v["filename"],
            data=_decoded(v["file_base64"]),
            title=v.get("title") or "",
        )
        entry = None
    else:
        material = material_services.material_paste(
            actor=principal,
            owner=owner,
            store=store,
            title=v["title"],
            text=v.get("text", ""),
            html=v.get("html", ""),
        )
        entry = material.entry.pk
    material.refresh_from_db()
    return {"material": material_out(material), "entry": entry}


class MaterialStatusIn(StrictSerializer):
    material = serializers.IntegerField(min_value=1)


def material_status_tool(principal: Principal, args: dict) -> dict:
    material = material_get_for(principal, validated(MaterialStatusIn, args)["material"])
    return {
        "material": material_out(material),
        "versions": [version_out(v) for v in material.versions.order_by("-number")],
        "entries": [
            {"id": e.pk, "name": e.name, "blocks": e.citing_blocks}
            for e in citing_entries(principal, material)
        ],
    }


FILE_INPUT = {
    "file_base64": {
        "type": "string",
        "contentEncoding": "base64",
        "minLength": 1,
        "description": "A file's bytes, base64-encoded (plain text, Markdown, HTML, PDF or DOCX, judged "
        "from its bytes; at most BRAIN_MATERIAL_MAX_MB): stored, then learned by a job. Instead of "
        "text or html; needs filename.",
    },
    "filename": {"type": "string", "minLength": 1, "maxLength": 255, "description": "The file's name."},
}

TOOLS = [
    ToolSpec("memory_search", "POST", "/api/memory/search", memory_search_tool, read_only=True),
    ToolSpec("memory_write", "POST", "/api/memory", memory_write_tool),
    ToolSpec(
        "memory_browse",
        "GET",
        "/api/memory/browse/{kind}/{id}",
        memory_browse_tool,
        renamed={"pk": "id"},  # the path parameter, whatever the schema calls it
        read_only=True,
    ),
    ToolSpec(
        "memory_retire",
        "DELETE",
        "/api/memory/{memory_id}",
        memory_retire_tool,
        renamed={"memory_id": "memory"},
    ),
    ToolSpec("context_compile", "POST", "/api/agents/{agent}/context", context_compile_tool, read_only=True),
    ToolSpec("experience_add", "POST", "/api/agents/{agent}/skills/{skill}/experience", experience_add_tool),
    ToolSpec("task_outcome_report", "POST", "/api/task-outcomes", task_outcome_report_tool),
    ToolSpec("conversation_open", "POST", "/api/conversations", conversation_open_tool),
    ToolSpec(
        "conversation_finish",
        "POST",
        "/api/conversations/{id}/finish",
        conversation_finish_tool,
        renamed={"pk": "conversation", "id": "conversation"},
    ),
    ToolSpec("messages_post", "POST", "/api/messages", messages_post_tool, batch="messages"),
    ToolSpec(
        "material_add",
        "POST",
        "/api/materials",
        material_add_tool,
        extra_input=FILE_INPUT,
        optional=("title",),
    ),
    ToolSpec(
        "material_status",
        "GET",
        "/api/materials/{id}",
        material_status_tool,
        renamed={"material_id": "material", "id": "material"},
        read_only=True,
    ),
]
TOOLS_BY_NAME = {t.name: t for t in TOOLS}


# --- resources --------------------------------------------------------------------------------


def memo_resource(principal: Principal) -> dict:
    return memo_out(memo_for(principal.agent))


def skills_resource(principal: Principal) -> dict:
    agent = principal.agent
    return {
        "agent": agent.name,
        "skills": [
            skill_selectors.skill_load(agent, row.skill)
            for row in skill_selectors.agent_skills(agent)
            if row.enabled
        ],
    }


RESOURCES = {
    "brain://memo": ("pinned-memo", "The agent's pinned memo: rules that apply every turn.", memo_resource),
    "brain://skills": (
        "enabled-skills",
        "The agent's enabled skills: base instructions followed by its overlay of lessons.",
        skills_resource,
    ),
}


# --- running one call -------------------------------------------------------------------------


def refusal_of(exc: Exception) -> ToolRefused | None:
    """The API's error answer to `exc` (the REST API's exception handler decides the body and
    status), or None for an exception the API would not answer (a crash)."""
    if not isinstance(exc, APIException | DomainError | Http404):
        return None
    response = api_exception_handler(exc, {})
    if response is None:
        return None
    return ToolRefused(response.status_code, json.loads(json.dumps(response.data, default=str)))


def _jsonable(value: dict) -> dict:
    # The API renders dates and decimals with DRF's encoder; do the same for structured output.
    from rest_framework.utils.encoders import JSONEncoder

    return json.loads(json.dumps(value, cls=JSONEncoder))


def call_tool(principal: Principal, name: str, arguments: dict | None) -> dict:
    """Run one tool as `principal`. Raises ToolRefused with the API's error for a refusal or
    bad arguments (nothing written), LookupError for an unknown tool."""
    spec = TOOLS_BY_NAME.get(name)
    if spec is None:
        raise LookupError(f"Unknown tool {name}.")
    args = dict(arguments or {})
    close_old_connections()  # what Django does at the start of each request
    try:
        given = [f for f in spec.implied if f in args]
        if given:
            raise ValidationError(
                {f: ["Leave this out: the MCP server acts as the agent of its token."] for f in given}
            )
        return _jsonable(spec.run(principal, args))
    except Exception as exc:
        refusal = refusal_of(exc)
        if refusal is None:
            raise
        raise refusal from None
    finally:
        close_old_connections()


def read_resource(principal: Principal, uri: str) -> dict:
    close_old_connections()
    try:
        return _jsonable(RESOURCES[uri][2](principal))
    finally:
        close_old_connections()
