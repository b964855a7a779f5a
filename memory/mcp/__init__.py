"""Brain as an MCP server: the agent-facing operations of the REST API as MCP tools and
resources, for an agent that holds one API token.

- `tools.py` — the tools and resources. Each one validates its arguments with the API's own
  input serializer and calls the same helper or service the REST view calls, so every rule
  (stores, who may join or post, review, the gate) has one implementation. A refusal is a tool
  error whose text is the API's message and whose structured `error` is the API's status and
  detail; nothing is written.
- `schemas.py` — tool input and output schemas, taken from the OpenAPI document at
  `/api/schema/` (the operation each tool mirrors), so the MCP schemas are the API's.
- `server.py` — the SDK's low-level `Server`: it hands tools the raw arguments (the
  serializers, not the SDK, decide what is valid) and runs each body in a thread with
  `sync_to_async`, because the ORM is synchronous.
- `http.py` — the streamable HTTP transport as an ASGI app behind bearer-token auth, mounted
  at `/mcp/` by `brainsite.asgi`. stdio is `manage.py mcp --token …`.
"""
