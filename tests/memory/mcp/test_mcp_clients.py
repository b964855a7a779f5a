"""Brain's MCP server read by clients no one here wrote: the official SDK client and the MCP
Inspector CLI (pinned, run with npx when it is on the machine). A refused call shows Brain's own
message in both, its structured detail validates against the tool's output schema, the schemas
pass the Inspector's portability check, and an oversized request is a JSON-RPC error."""

import functools
import json
import os
import shutil
import subprocess

import httpx
import jsonschema
import pytest

from knowledge.models import Memory
from memory.conversations.services import conversation_finish
from tests import factory
from tests.mcp_helpers import AsgiServer
from tests.memory.mcp.test_mcp import BASE_DIR, _http_client, _run

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
        for name, args, status, message in _refusals(finished):
            tool_args = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in args.items()]
            code, out, err = inspector(
                target, "--method", "tools/call", "--tool-name", name, "--tool-arg", *tool_args
            )
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
            "params": {"name": "memory_write", "arguments": {"scope": "agent", "text": "x" * 20_000}},
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
        assert "at most 10,000 bytes are accepted" in error["message"]
        assert error["data"] == {"max_body_bytes": 10_000}
    finally:
        server.close()
    assert not Memory.objects.filter(text__startswith="xxxx").exists()
