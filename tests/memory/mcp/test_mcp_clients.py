"""Brain's MCP server read by clients no one here wrote: the official SDK client and the MCP
Inspector CLI (pinned, run with npx when it is on the machine). A refused call shows Brain's own
message in both, its structured detail validates against the tool's output schema, the schemas
pass the Inspector's portability check, and an oversized request is a JSON-RPC error."""

import functools
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import jsonschema
import pytest

from knowledge.models import Memory
from memory.conversations.services import conversation_finish
from tests import factory
from tests.mcp_helpers import AsgiServer, subprocess_database_url
from tests.memory.mcp.test_mcp import BASE_DIR, _db, _http_client, _run

pytestmark = pytest.mark.django_db(transaction=True)

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


@functools.cache
def _inspector_missing() -> str | None:
    """Why the Inspector cannot run here (None when it can): npx absent, or the package not
    installable (npx fetches it once from the npm registry, then runs it from its cache)."""
    if shutil.which("npx") is None:
        return "npx is not installed"
    try:
        done = subprocess.run(
            ["npx", "-y", INSPECTOR, "--cli", "--version"], capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        return f"npx could not fetch {INSPECTOR} in 5 minutes"
    if done.returncode != 0:
        return f"npx could not run {INSPECTOR}: {done.stderr.strip()[-300:]}"
    return None


@pytest.fixture
def inspector():
    reason = _inspector_missing()
    if reason:
        pytest.skip(reason)

    def run(target: list[str], *args: str, env: dict | None = None) -> tuple[int, str, str]:
        done = subprocess.run(
            ["npx", "-y", INSPECTOR, "--cli", *target, *args],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=str(BASE_DIR),
            env={**os.environ, **(env or {})},
        )
        stderr = "\n".join(line for line in done.stderr.splitlines() if "EBADENGINE" not in line)
        return done.returncode, done.stdout, stderr

    return run


def _http_target(url: str, token: str) -> list[str]:
    return [f"{url}/mcp/", "--transport", "http", "--header", f"Authorization: Bearer {token}"]


@pytest.fixture
def finished(world):
    conversation = factory.make_conversation(world.copilot, world.general, thread="done")
    conversation_finish(actor=factory.SYSTEM, conversation_id=conversation.pk)
    return conversation.pk


def _refusals(finished: int) -> list[tuple[str, dict, int, str]]:
    """One refused call per tool: (tool, arguments, status, the message a client must show)."""
    either = "Give a conversation (id) or a channel (name)."
    return [
        ("memory_search", {"q": "vpn"}, 400, f"Invalid arguments — conversation: {either}"),
        (
            "memory_write",
            {"scope": "agent", "text": "x", "teir": "w"},
            400,
            "Invalid arguments — teir: Unknown field.",
        ),
        ("memory_browse", {"kind": "memory", "id": 999999}, 404, "No memory 999999."),
        ("memory_retire", {"memory": 999999}, 404, "There is no memory 999999."),
        ("context_compile", {"q": "vpn"}, 400, f"Invalid arguments — conversation: {either}"),
        (
            "experience_add",
            {
                "skill": "nope",
                "lesson": "Ask first.",
                "sources": [{"kind": "conversation", "ref": str(finished)}],
            },
            404,
            "There is no skill named nope.",
        ),
        (
            "task_outcome_report",
            {"skill": "nope", "task": "t", "result": "success"},
            400,
            "Invalid arguments — skill: There is no skill named nope.",
        ),
        (
            "conversation_open",
            {"channel": "no-such-channel"},
            400,
            "Invalid arguments — channel: Unknown channel no-such-channel.",
        ),
        ("conversation_finish", {"conversation": finished}, 409, "This conversation is already finished."),
        (
            "messages_post",
            {"messages": [{"channel": "general", "speaker": "alice", "text": 5}]},
            400,
            "Invalid arguments — messages.0.text: Must be a string, not int.",
        ),
        (
            "material_add",
            {"title": "Runbook"},
            400,
            "Invalid arguments — text: Send one of text, html or file_base64 (with filename).",
        ),
        ("material_status", {"material": 999999}, 404, "There is no material 999999 you can see."),
    ]


def test_every_tools_refusal_shows_brains_message_in_the_sdk_client(world, finished):
    server = AsgiServer()
    try:

        async def main():
            async with _http_client(server.url, world.tokens["copilot"]) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                refusals = _refusals(finished)
                assert {name for name, *_ in refusals} == set(tools)
                for name, args, status, message in refusals:
                    result = await client.call_tool(name, args)
                    assert result.is_error, name
                    assert [c.text for c in result.content] == [message], name
                    assert result.structured_content["error"]["status"] == status, name
                    assert result.structured_content["error"]["message"] == message
                    # The detail validates against the tool's declared output schema, by the
                    # SDK's own check and by a plain JSON Schema validator.
                    await client.session.validate_tool_result(name, result)
                    jsonschema.validate(result.structured_content, tools[name].output_schema)
                # A result without its required members and without `error` still fails.
                with pytest.raises(jsonschema.ValidationError):
                    jsonschema.validate({"id": 1}, tools["conversation_open"].output_schema)

        memories = Memory.objects.count()
        _run(main)
        assert Memory.objects.count() == memories
    finally:
        server.close()


def test_every_tools_refusal_shows_brains_message_in_the_inspector(world, finished, inspector):
    server = AsgiServer()
    try:
        target = _http_target(server.url, world.tokens["copilot"])

        def call(refusal):
            name, args, _status, _message = refusal
            tool_args = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in args.items()]
            return inspector(target, "--method", "tools/call", "--tool-name", name, "--tool-arg", *tool_args)

        refusals = _refusals(finished)
        with ThreadPoolExecutor(max_workers=3) as pool:  # each call is a Node process of its own
            answers = list(pool.map(call, refusals))
        for (name, _args, status, message), (code, out, err) in zip(refusals, answers, strict=True):
            assert code == 5, (name, out, err)  # the Inspector's exit code for an isError result
            result = json.loads(out)
            assert result["isError"] is True
            assert [c["text"] for c in result["content"]] == [message], name
            assert result["structuredContent"]["error"]["status"] == status
            assert "must have required property" not in err
    finally:
        server.close()


def test_the_inspector_finds_no_portability_problem_in_the_tool_schemas(world, inspector):
    server = AsgiServer()
    try:
        code, out, err = inspector(
            _http_target(server.url, world.tokens["copilot"]), "--method", "tools/list", "--strict"
        )
        assert code == 0, err
        assert "Warning" not in err and "Error" not in err, err
        assert len(json.loads(out)["tools"]) >= 9
        code, out, err = inspector(
            _http_target(server.url, world.tokens["copilot"]), "--method", "tools/list"
        )
        assert "0 errors, 0 warnings" in err or "warning" not in err.lower(), err
    finally:
        server.close()


def test_an_oversized_mcp_request_is_a_json_rpc_error(world, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    settings.BRAIN_MATERIAL_MAX_MB = 0
    server = AsgiServer()
    try:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "memory_write", "arguments": {"scope": "agent", "text": "x" * 100_000}},
        }
        answer = httpx.post(
            f"{server.url}/mcp/",
            json=body,
            headers={
                "Authorization": f"Bearer {world.tokens['copilot']}",
                "Accept": "application/json, text/event-stream",
            },
        )
        assert answer.status_code == 413
        assert answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert error["code"] == -32600
        # The limit: BRAIN_MAX_BODY_BYTES, or room for the largest material_add file as base64.
        limit = 64 * 1024
        assert f"at most {limit:,} bytes are accepted" in error["message"]
        assert error["data"] == {"max_body_bytes": limit}
    finally:
        server.close()
    assert not Memory.objects.filter(text__startswith="xxxx").exists()


# --- tokens: what a client without the right one is told --------------------------------------

TOLD = "Invalid or missing Brain agent token"


def test_the_protected_resource_metadata_names_brains_own_tokens(world, settings):
    server = AsgiServer()
    settings.BRAIN_PUBLIC_URL = server.url  # the origin Brain names comes from configuration
    try:
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            meta = httpx.get(f"{server.url}{path}")
            assert meta.status_code == 200 and meta.headers["content-type"] == "application/json"
            body = meta.json()
            assert body["resource"] == f"{server.url}/mcp/"
            assert body["bearer_methods_supported"] == ["header"]
            assert body["authorization_servers"] == []
            assert "token store" in body["brain_token_issuer"]
        # Where an OAuth client then looks for an authorization server, JSON says there is none.
        for path in ("/.well-known/oauth-authorization-server", "/register"):
            answer = httpx.post(f"{server.url}{path}", json={})
            assert answer.status_code == 404
            assert "no OAuth authorization server" in answer.json()["error_description"]
    finally:
        server.close()


def test_a_missing_or_bad_token_is_a_401_that_says_so(world, settings):
    server = AsgiServer()
    settings.BRAIN_PUBLIC_URL = server.url  # the origin Brain names comes from configuration
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        for headers, invalid in (({}, False), ({"Authorization": "Bearer nope"}, True)):
            answer = httpx.post(f"{server.url}/mcp/", json=body, headers=headers)
            assert answer.status_code == 401
            assert answer.json()["error"].startswith(f"{TOLD}: ")
            challenge = answer.headers["WWW-Authenticate"]
            assert challenge.startswith('Bearer realm="brain"')
            assert 'error_description="invalid or missing Brain agent token"' in challenge
            assert f'resource_metadata="{server.url}/.well-known/oauth-protected-resource/mcp"' in challenge
            assert ('error="invalid_token"' in challenge) is invalid
        person = httpx.post(
            f"{server.url}/mcp/", json=body, headers={"Authorization": f"Bearer {world.tokens['reviewer']}"}
        )
        assert person.status_code == 403 and "agent tokens only" in person.json()["error"]
    finally:
        server.close()


def test_the_inspector_tells_a_missing_or_bad_token_over_http(world, settings, inspector):
    server = AsgiServer()
    settings.BRAIN_PUBLIC_URL = server.url  # the origin Brain names comes from configuration
    try:
        # Non-interactive, as the Inspector asks for CI: Brain's 401 body is what it shows.
        code, out, err = inspector(
            _http_target(server.url, "nope"), "--method", "tools/list", "--stored-auth-only"
        )
        assert code == 3, err  # the Inspector's auth_required
        assert f"{TOLD}: Unknown or revoked token." in json.loads(err.splitlines()[-1])["error"]["message"]
        code, out, err = inspector(
            [f"{server.url}/mcp/", "--transport", "http"], "--method", "tools/list", "--stored-auth-only"
        )
        assert f"{TOLD}: use the header" in json.loads(err.splitlines()[-1])["error"]["message"]
        # Interactive: it follows the metadata, finds no authorization server, and says so.
        code, out, err = inspector(
            _http_target(server.url, "nope"),
            "--method",
            "tools/list",
            env={
                "MCP_AUTO_OPEN_ENABLED": "true",
                "BROWSER": "/bin/true",
                "MCP_INSPECTOR_SECRET_STORE": "memory",
            },
        )
        assert code != 0
        assert "no OAuth authorization server" in err, err
    finally:
        server.close()


def _stdio_env() -> dict:
    return {
        "DJANGO_SETTINGS_MODULE": "brainsite.settings",
        "DATABASE_URL": subprocess_database_url(),
        "BRAIN_EMBEDDINGS": "local",
        "PYTHONPATH": str(BASE_DIR),
        "PATH": os.environ.get("PATH", ""),
    }


def test_a_bad_token_over_stdio_is_an_mcp_error_in_the_sdk_client(world):
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError

    told = []

    async def main():
        params = StdioServerParameters(
            command=sys.executable,
            args=["manage.py", "mcp", "--token", "nope"],
            env=_stdio_env(),
            cwd=str(BASE_DIR),
        )
        try:
            async with Client(params, read_timeout_seconds=60):
                pass
        except BaseException as exc:  # the SDK raises it inside an exception group
            found = [exc]
            while found:
                e = found.pop()
                if isinstance(e, MCPError):
                    told.append(e.error.message)
                found.extend(getattr(e, "exceptions", ()))
                if e.__cause__:
                    found.append(e.__cause__)

    _run(main)
    assert told and told[0] == f"{TOLD}: Unknown or revoked token."


def test_the_inspector_tells_a_bad_token_over_stdio(world, inspector):
    env_args = [a for k, v in _stdio_env().items() if k != "PATH" for a in ("-e", f"{k}={v}")]
    target = [*env_args, sys.executable, "manage.py", "mcp", "--token", "nope"]
    code, out, err = inspector(target, "--method", "tools/list")
    assert code != 0
    # the Inspector's own JSON line; the server's stderr, which it passes on, may come after it
    said = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert said and said[-1]["error"]["message"] == f"{TOLD}: Unknown or revoked token.", err


# --- materials --------------------------------------------------------------------------------


def test_an_agent_adds_materials_and_reads_their_state_over_mcp(world, settings):
    import base64

    from knowledge.models import Material

    settings.BRAIN_MATERIAL_MAX_MB = 1
    server = AsgiServer()
    try:

        async def main():
            async with _http_client(server.url, world.tokens["copilot"]) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                schema = tools["material_add"].input_schema
                assert {"text", "html", "file_base64", "filename", "title", "scope"} <= set(
                    schema["properties"]
                )
                assert "agent" not in schema["properties"] and "title" not in schema.get("required", [])

                pasted = await client.call_tool(
                    "material_add", {"title": "VPN runbook", "text": "# VPN\n\nRestart the client first."}
                )
                assert not pasted.is_error, pasted.content[0].text
                assert pasted.structured_content["material"]["agent"] == "copilot"
                assert pasted.structured_content["entry"]
                html = await client.call_tool(
                    "material_add", {"title": "FAQ", "html": "<h1>FAQ</h1><p>Ask for the version.</p>"}
                )
                assert not html.is_error, html.content[0].text
                assert html.structured_content["entry"] != pasted.structured_content["entry"]

                encoded = base64.b64encode(b"# Escalation\n\nPage the on-call engineer.\n").decode()
                filed = await client.call_tool(
                    "material_add", {"file_base64": encoded, "filename": "escalation.md", "scope": "shared"}
                )
                assert not filed.is_error, filed.content[0].text
                material = filed.structured_content["material"]
                assert (
                    material["title"] == "escalation.md"
                    and material["version"]["filename"] == "escalation.md"
                )
                assert filed.structured_content["entry"] is None  # learned by a job

                status = await client.call_tool("material_status", {"material": material["id"]})
                assert not status.is_error, status.content[0].text
                assert status.structured_content["material"]["id"] == material["id"]
                assert status.structured_content["material"]["state"] in ("queued", "learning", "learned")
                assert status.structured_content["versions"][0]["size"] == len(base64.b64decode(encoded))
                for result, name in (
                    (pasted, "material_add"),
                    (filed, "material_add"),
                    (status, "material_status"),
                ):
                    jsonschema.validate(result.structured_content, tools[name].output_schema)

                # Size-checked like the API: 413, nothing stored; bad base64 and bad types are 400s.
                count = await _db(Material.objects.count)
                big = base64.b64encode(b"a" * (1024 * 1024 + 10)).decode()
                refused = await client.call_tool("material_add", {"file_base64": big, "filename": "big.txt"})
                assert refused.is_error and refused.structured_content["error"]["status"] == 413
                assert "BRAIN_MATERIAL_MAX_MB" in refused.content[0].text
                refused = await client.call_tool(
                    "material_add", {"file_base64": "not base64!", "filename": "x.txt"}
                )
                assert refused.content[0].text == "Invalid arguments — file_base64: Not valid base64."
                exe = base64.b64encode(b"\x7fELF\x02\x01\x01" + bytes(200)).decode()
                refused = await client.call_tool("material_add", {"file_base64": exe, "filename": "tool"})
                assert refused.is_error and refused.structured_content["error"]["status"] == 400
                refused = await client.call_tool(
                    "material_add", {"text": "x", "title": "t", "agent": "scribe"}
                )
                assert refused.is_error and "agent" in refused.structured_content["error"]["fields"]
                assert await _db(Material.objects.count) == count

        _run(main)
    finally:
        server.close()


def _schemas_in(schema, path="$"):
    """Every subschema of a JSON Schema, with its path."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _schemas_in(sub, f"{path}.properties.{name}")
    for key in ("items", "additionalProperties", "not"):
        yield from _schemas_in(schema.get(key), f"{path}.{key}")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key) or []):
            yield from _schemas_in(sub, f"{path}.{key}[{i}]")


def test_the_tool_schemas_are_portable_without_the_inspector():
    """What the Inspector's --strict checks, checked here too (for machines without npx): no
    `type` arrays, no schema that constrains nothing; and the OpenAPI document keeps its own
    nullable spelling."""
    from memory.mcp.schemas import CONSTRAINING, openapi
    from memory.mcp.server import tool_list

    for tool in tool_list():
        for side, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
            for path, sub in _schemas_in(schema):
                where = f"{tool.name} {side} {path}"
                assert not isinstance(sub.get("type"), list), where
                assert sub.keys() & CONSTRAINING or sub.keys() & {"required"}, where
        assert "error" in tool.output_schema.get("properties", {}) or any(
            "error" in v.get("properties", {}) for v in tool.output_schema.get("anyOf", [])
        ), tool.name
    assert '"nullable": true' in json.dumps(openapi())
