"""The MCP server object: tools/list, tools/call, resources/list and resources/read over the
SDK's low-level `Server`.

The low-level server (not `MCPServer`) because it passes a call's raw arguments through: the
API's serializers decide what is valid, so an unknown or misspelt argument is refused exactly
as the REST API refuses it, instead of being dropped by a generated argument model. Each call
runs in Django's thread-sensitive executor (`sync_to_async`): the ORM is synchronous, and one
thread keeps one database connection across calls."""

import json
from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp import types
from mcp.server import Server, ServerRequestContext
from rest_framework.exceptions import APIException

from knowledge.principal import Principal
from memory.mcp import schemas
from memory.mcp.tools import RESOURCES, TOOLS, ToolRefused, call_tool, read_resource, refusal_of

INSTRUCTIONS = (
    "Brain is this agent's long-term memory. Open a conversation in the channel you work in "
    "(conversation_open), compile context for each turn (context_compile), search and browse "
    "memory inside the conversation's scope, report messages and task outcomes, write memories "
    "with their sources, and finish the conversation. A refused call is a tool error whose text is "
    "the REST API's message; its structured `error` gives the HTTP status and, for invalid "
    "arguments, each field's messages."
)

PrincipalFor = Callable[[ServerRequestContext], Principal]


def tool_list() -> list[types.Tool]:
    """The tools with the API's schemas (the OpenAPI document is built once per process)."""
    return [
        types.Tool(
            name=spec.name,
            description=schemas.description(spec.method, spec.path),
            input_schema=schemas.input_schema(
                spec.method,
                spec.path,
                implied=spec.implied,
                renamed=spec.renamed,
                batch=spec.batch,
                extra=spec.extra_input,
                optional=spec.optional,
            ),
            output_schema=schemas.output_schema(spec.method, spec.path, batch=spec.batch),
            annotations=types.ToolAnnotations(read_only_hint=spec.read_only, destructive_hint=False),
        )
        for spec in TOOLS
    ]


def build_server(principal_for: PrincipalFor) -> Server:
    """A server whose calls act as `principal_for(ctx)` (called in the call's thread, so it may
    read the database): on stdio the token's agent, looked up again for every call so a revoked
    token stops at once; over HTTP the agent `memory.mcp.http` authenticated for the request."""
    tools_cached: list[types.Tool] = []

    async def list_tools(ctx, params) -> types.ListToolsResult:
        if not tools_cached:
            tools_cached.extend(await sync_to_async(tool_list)())
        return types.ListToolsResult(tools=tools_cached)

    async def call(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        def run():
            close_old_connections()
            try:
                principal = principal_for(ctx)
            except APIException as exc:  # a token revoked since the server started
                raise refusal_of(exc) from None
            return call_tool(principal, params.name, params.arguments)

        try:
            out = await sync_to_async(run)()
        except ToolRefused as refusal:
            # By the spec: a tool error is a result with isError and the message as text (what a
            # client shows); the detail is the `error` member of the tool's output schema.
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=refusal.message)],
                structured_content=refusal.structured,
                is_error=True,
            )
        except LookupError as exc:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(exc))], is_error=True
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(out))], structured_content=out
        )

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=uri, name=name, description=text, mime_type="application/json")
                for uri, (name, text, _fn) in RESOURCES.items()
            ]
        )

    async def read(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri not in RESOURCES:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource {uri}.")
        out = await sync_to_async(lambda: read_resource(principal_for(ctx), uri))()
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(out))]
        )

    return Server(
        "brain",
        version="1",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call,
        on_list_resources=list_resources,
        on_read_resource=read,
    )
