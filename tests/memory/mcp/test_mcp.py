"""The MCP server driven by the SDK's own client, over stdio (`manage.py mcp`) and over
streamable HTTP (`/mcp/` of the ASGI web app): every tool and resource, the agent's scopes, and
refusals that write nothing."""

import json
import os
import sys
import threading
from pathlib import Path

import anyio
import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from mcp import Client, StdioServerParameters

from knowledge.models import Channel, Memory, Message, TaskOutcome
from knowledge.principal import Principal
from memory.skills import services as skill_services
from tests import factory
from tests.mcp_helpers import AsgiServer, subprocess_database_url

BASE_DIR = Path(__file__).resolve().parents[3]
ADMIN = Principal(kind="person", name="tests", role="admin")
TOOLS = {
    "material_add",
    "material_status",
    "memory_search",
    "memory_write",
    "memory_browse",
    "memory_retire",
    "context_compile",
    "experience_add",
    "task_outcome_report",
    "conversation_open",
    "conversation_finish",
    "messages_post",
}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(world):
    """copilot's skill, and scribe's own DM with bob and a memory in scribe's self store."""
    skill = skill_services.skill_create(actor=ADMIN, name="triage", title="Triage", instructions="Ask first.")
    skill_services.skill_enable(actor=ADMIN, agent=world.copilot, skill=skill, enabled=True)
    dm_bob = factory.make_channel("dm-bob", kind=Channel.KIND_DM, person=world.bob, agent=world.scribe)
    factory.make_conversation(world.scribe, dm_bob)
    (secret_message,) = factory.post_messages(dm_bob, [{"speaker": "bob", "text": "my salary is 90k"}])
    secret = factory.make_memory(world.scribe, "scribe's own note", store="self")
    return {"secret_message": secret_message, "secret_memory": secret.pk}


def _stdio_client(token: str) -> Client:
    env = {
        "DJANGO_SETTINGS_MODULE": "brainsite.settings",
        "DATABASE_URL": subprocess_database_url(),
        "BRAIN_EMBEDDINGS": "local",
        "PYTHONPATH": str(BASE_DIR),
        "PATH": os.environ.get("PATH", ""),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", "--token", token], env=env, cwd=str(BASE_DIR)
    )
    return Client(params, read_timeout_seconds=60)


def _http_client(url: str, token: str) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp/", http_client=http), read_timeout_seconds=60)


def _run(main) -> None:
    """anyio.run in a thread of its own: the browser tests' Playwright keeps an event loop
    running in the main thread for the whole session."""
    errors = []

    def target():
        try:
            anyio.run(main)
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


async def _db(fn):
    """The test's own reads run in a thread (the ORM is synchronous), which closes its
    connection so the test database can be dropped at the end."""

    def run():
        try:
            return fn()
        finally:
            connection.close()

    return await sync_to_async(run)()


def _counts():
    return Memory.objects.count(), Message.objects.count(), TaskOutcome.objects.count()


def _revoke_copilot():
    from knowledge.models import ApiToken
    from knowledge.principals import services

    for token in ApiToken.objects.filter(agent__name="copilot"):
        services.token_revoke(actor=factory.SYSTEM, token_id=token.pk)


def _ok(result) -> dict:
    assert not result.is_error, result.content[0].text
    assert result.structured_content == json.loads(result.content[0].text)
    return result.structured_content


def _refused(result, status: int) -> dict:
    """A tool error by the spec: the text a client shows is Brain's message, and the structured
    `error` member carries the status and the API's detail."""
    assert result.is_error
    body = result.structured_content["error"]
    assert body["status"] == status, body
    assert result.content[0].text == body["message"]
    return body


async def _journey(client: Client, world, setup) -> None:
    """One agent's whole cycle through every tool and resource, then what it may not do."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    assert tools["memory_write"].input_schema["additionalProperties"] is False
    assert "agent" not in tools["memory_write"].input_schema["properties"]
    assert tools["conversation_open"].output_schema["properties"]["read_stores"]["type"] == "array"

    conversation = _ok(await client.call_tool("conversation_open", {"channel": "general"}))
    assert conversation["agent"] == "copilot" and conversation["status"] == "open"
    cid = conversation["id"]

    posted = _ok(
        await client.call_tool(
            "messages_post",
            {
                "messages": [
                    {"channel": "general", "speaker": "alice", "text": "VPN error E4012", "external_id": "m1"}
                ]
            },
        )
    )
    assert posted["stored"] == 1 and posted["messages"][0]["duplicate"] is False

    written = _ok(
        await client.call_tool(
            "memory_write",
            {
                "scope": "shared",
                "text": "VPN error E4012 is fixed by client 5.2.1",
                "sources": [{"kind": "kb", "ref": "KB-7"}],
                "conversation": cid,
            },
        )
    )
    assert written["status"] == "queued"  # copilot is untrusted: its writes wait for review
    assert await _db(lambda: Memory.objects.filter(pk=written["id"], owner=world.copilot).exists())
    # as the REST API does, a write takes `state`, `event_id` and `conversation`
    assert {"state", "event_id", "conversation"} <= set(tools["memory_write"].input_schema["properties"])
    state = _ok(
        await client.call_tool(
            "memory_write",
            {
                "scope": "agent",
                "text": "cursor at ticket 7",
                "state": True,
                "event_id": "run-1/7",
                "conversation": cid,
            },
        )
    )
    assert (state["status"], state["tier"], state["event_id"], state["conversation"]) == (
        "active",
        "working",
        "run-1/7",
        cid,
    )

    found = _ok(await client.call_tool("memory_search", {"q": "E4012 VPN", "conversation": cid, "k": 5}))
    assert any("E4012" in r.get("text", "") for r in found["results"])

    context = _ok(
        await client.call_tool("context_compile", {"conversation": cid, "q": "VPN", "budget_tokens": 800})
    )
    assert context["agent"] == "copilot" and context["total_tokens"] <= 800
    assert any("Triage" in json.dumps(s) for s in context["sections"])

    opened = _ok(await client.call_tool("memory_browse", {"kind": "conversation", "id": cid}))
    assert opened["kind"] == "conversation"

    outcome = _ok(
        await client.call_tool(
            "task_outcome_report",
            {
                "skill": "triage",
                "task": "fix VPN",
                "result": "success",
                "conversation": cid,
                "external_id": "t1",
            },
        )
    )
    lesson = _ok(
        await client.call_tool(
            "experience_add",
            {
                "skill": "triage",
                "lesson": "Ask for the VPN client version before anything else.",
                "sources": [{"kind": "task_outcome", "ref": str(outcome["id"])}],
            },
        )
    )
    assert lesson["status"] == "queued"

    resources = {str(r.uri) for r in (await client.list_resources()).resources}
    assert resources == {"brain://memo", "brain://skills"}
    skills = json.loads((await client.read_resource("brain://skills")).contents[0].text)
    assert [
        s["skill"]["name"] if isinstance(s.get("skill"), dict) else s.get("name") for s in skills["skills"]
    ]
    memo = json.loads((await client.read_resource("brain://memo")).contents[0].text)
    assert memo["agent"] == "copilot"

    # --- scopes: another agent's DM and private store stay closed -------------------------
    body = _refused(await client.call_tool("conversation_open", {"channel": "dm-bob"}), 403)
    assert body["message"]
    _refused(await client.call_tool("memory_search", {"q": "salary", "channel": "dm-bob"}), 403)
    mine = _ok(await client.call_tool("memory_search", {"q": "scribe own note salary", "conversation": cid}))
    assert not any(
        "scribe's own note" in r.get("text", "") or "salary" in r.get("text", "") for r in mine["results"]
    )
    refused = await client.call_tool("memory_browse", {"kind": "message", "id": setup["secret_message"]})
    assert refused.is_error and refused.structured_content["error"]["status"] in (403, 404)
    refused = await client.call_tool("memory_browse", {"kind": "memory", "id": setup["secret_memory"]})
    assert refused.is_error and refused.structured_content["error"]["status"] in (403, 404)
    _refused(
        await client.call_tool(
            "messages_post", {"messages": [{"channel": "dm-bob", "speaker": "x", "text": "hi"}]}
        ),
        403,
    )

    # --- bad arguments: the API's 400, nothing written -------------------------------------
    memories, messages, outcomes = await _db(_counts)
    body = _refused(
        await client.call_tool("memory_write", {"scope": "agent", "text": "x", "teir": "working"}), 400
    )
    assert body["message"] == "Invalid arguments — teir: Unknown field." and body["fields"]["teir"] == [
        "Unknown field."
    ]
    body = _refused(
        await client.call_tool("memory_write", {"scope": "agent", "text": "x", "agent": "scribe"}), 400
    )
    assert "agent" in body["fields"]
    _refused(await client.call_tool("memory_write", {"scope": "private:nobody", "text": "x"}), 400)
    _refused(await client.call_tool("messages_post", {"messages": [{"channel": "general", "text": 5}]}), 400)
    _refused(
        await client.call_tool("task_outcome_report", {"skill": "nope", "task": "t", "result": "success"}),
        400,
    )
    assert await _db(_counts) == (memories, messages, outcomes)

    finished = _ok(await client.call_tool("conversation_finish", {"conversation": cid}))
    assert finished["status"] == "finished"
    _refused(await client.call_tool("conversation_finish", {"conversation": cid}), 409)


def test_an_agent_works_through_mcp_over_stdio(world, setup):
    async def main():
        async with _stdio_client(world.tokens["copilot"]) as client:
            await _journey(client, world, setup)
            # A token revoked while the server runs stops at its next call.
            await _db(_revoke_copilot)
            body = _refused(await client.call_tool("conversation_open", {"channel": "general"}), 401)
            assert body["message"] == "Unknown or revoked token."

    _run(main)


def test_an_agent_works_through_mcp_over_http(world, setup):
    server = AsgiServer()
    try:

        async def main():
            async with _http_client(server.url, world.tokens["copilot"]) as client:
                await _journey(client, world, setup)

        _run(main)

        # The same web app still serves the REST API beside /mcp/.
        me = httpx.get(f"{server.url}/api/me", headers={"Authorization": f"Bearer {world.tokens['copilot']}"})
        assert me.json()["name"] == "copilot"
    finally:
        server.close()


def test_mcp_over_http_refuses_bad_and_non_agent_tokens(world):
    server = AsgiServer()
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        missing = httpx.post(f"{server.url}/mcp/", json=body)
        assert missing.status_code == 401 and "Bearer" in missing.json()["error"]
        assert missing.headers["WWW-Authenticate"].startswith("Bearer")
        bad = httpx.post(f"{server.url}/mcp/", json=body, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401
        assert bad.json() == {"error": "Invalid or missing Brain agent token: Unknown or revoked token."}
        person = httpx.post(
            f"{server.url}/mcp/", json=body, headers={"Authorization": f"Bearer {world.tokens['reviewer']}"}
        )
        assert person.status_code == 403
    finally:
        server.close()


def test_the_stdio_command_refuses_a_bad_or_non_agent_token(world):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="Unknown or revoked token."):
        call_command("mcp", token="nope")
    with pytest.raises(CommandError, match="agent tokens only"):
        call_command("mcp", token=world.tokens["reviewer"])


def test_the_asgi_web_app_serves_the_console_beside_mcp(world):
    """`make run` serves brainsite.asgi: the console (a login with its CSRF cookie, a page,
    a static file) works there as under WSGI."""
    import re

    server = AsgiServer()
    try:
        with httpx.Client(base_url=server.url) as browser:
            form = browser.get("/login/")
            assert form.status_code == 200
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
            logged_in = browser.post(
                "/login/",
                data={"username": "rita", "password": "correct-horse-9", "csrfmiddlewaretoken": csrf},
                headers={"Referer": f"{server.url}/login/"},
            )
            assert logged_in.status_code == 302
            assert browser.get("/review/").status_code == 200
            assert browser.get("/static/app.css").status_code == 200
            assert browser.get("/healthz").status_code in (200, 503)
    finally:
        server.close()
