"""The README's "Agents" snippets, run: each MCP host configuration connects (the server it
describes is started, the SDK client connects the way the host would, with the configuration's
command, arguments, environment, URL and headers, and lists Brain's tools), the LangGraph
example remembers across two runs against a live Brain, and the Mem0 import command imports."""

import contextlib
import io
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from mcp import Client, StdioServerParameters

from knowledge.models import Memory
from tests import factory
from tests.mcp_helpers import AsgiServer
from tests.memory.mcp.test_mcp import _run
from tests.memory.mcp.test_mcp_clients import _stdio_env

BASE_DIR = Path(__file__).resolve().parents[1]
README = BASE_DIR / "README.md"
PLACEHOLDER_URL = "http://127.0.0.1:8000"
PLACEHOLDER_TOKEN = "<the agent's token>"

pytestmark = pytest.mark.django_db(transaction=True)


def snippet(name: str) -> str:
    found = re.search(rf"<!-- readme-test: {name} -->\n```\w*\n(.*?)\n```", README.read_text(), re.S)
    assert found, f"README has no snippet {name}"
    return found.group(1)


def filled(text: str, *, url: str = PLACEHOLDER_URL, token: str = "") -> str:
    return (
        text.replace("/path/to/brain", str(BASE_DIR))
        .replace(PLACEHOLDER_TOKEN, token)
        .replace(PLACEHOLDER_URL, url)
    )


def _tools_over_stdio(command: str, args: list[str], env: dict) -> set[str]:
    names = set()

    async def main():
        params = StdioServerParameters(command=command, args=args, env=env)
        async with Client(params, read_timeout_seconds=60) as client:
            names.update(t.name for t in (await client.list_tools()).tools)

    _run(main)
    return names


def _tools_over_http(url: str, headers: dict) -> set[str]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    names = set()

    async def main():
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        async with Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as client:
            names.update(t.name for t in (await client.list_tools()).tools)

    _run(main)
    return names


def test_the_claude_desktop_configuration_starts_brain_over_stdio(world):
    server = json.loads(filled(snippet("claude-desktop"), token=world.tokens["copilot"]))["mcpServers"][
        "brain"
    ]
    assert Path(server["command"]).exists() and Path(server["args"][0]).name == "manage.py"
    # The test database stands in for the one a real checkout's settings name.
    env = {**_stdio_env(), **server["env"]}
    assert {"memory_search", "material_add"} <= _tools_over_stdio(server["command"], server["args"], env)


def test_the_cursor_configuration_connects_over_http(world):
    asgi = AsgiServer()
    try:
        config = json.loads(filled(snippet("cursor"), url=asgi.url, token=world.tokens["copilot"]))
        server = config["mcpServers"]["brain"]
        assert {"memory_search", "material_status"} <= _tools_over_http(server["url"], server["headers"])
    finally:
        asgi.close()


def test_the_vscode_configuration_connects_over_http(world):
    asgi = AsgiServer()
    try:
        config = json.loads(filled(snippet("vscode"), url=asgi.url))
        server = config["servers"]["brain"]
        assert server["type"] == "http"
        # VS Code asks for each ${input:…} it finds and puts the answer in its place.
        (ask,) = config["inputs"]
        assert ask["type"] == "promptString" and ask["password"] is True
        headers = {
            k: v.replace(f"${{input:{ask['id']}}}", world.tokens["copilot"])
            for k, v in server["headers"].items()
        }
        assert "memory_write" in _tools_over_http(server["url"], headers)
    finally:
        asgi.close()


def test_the_claude_code_command_names_the_url_and_header(world):
    asgi = AsgiServer()
    try:
        argv = shlex.split(filled(snippet("claude-code"), url=asgi.url, token=world.tokens["copilot"]))
        assert argv[:6] == ["claude", "mcp", "add", "--transport", "http", "brain"]
        url, flag, header = argv[6:]
        assert flag == "--header"
        name, _, value = header.partition(": ")
        # The claude CLI is not installed here: connect the way it is told to.
        assert "context_compile" in _tools_over_http(url, {name: value})
    finally:
        asgi.close()


def test_the_langgraph_example_remembers_across_runs(live_server, world):
    code = filled(snippet("langgraph"), url=live_server.url, token=world.tokens["scribe"])
    printed = []
    for _run_number in range(2):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md#langgraph", "exec"), {"__name__": "readme_langgraph"})
        printed.append(out.getvalue().strip())
    assert printed == ["Visit 1 of alice", "Visit 2 of alice"]


def test_the_mem0_import_command_imports(world, tmp_path, monkeypatch):
    argv = shlex.split(snippet("mem0"))
    assert argv[:3] == [".venv/bin/python", "manage.py", "import_mem0"]
    factory.make_agent("helper", trusted=True)
    shutil.copy(BASE_DIR / "tests" / "memory" / "imports" / "mem0_get_all.json", tmp_path / "mem0.json")
    monkeypatch.chdir(tmp_path)  # the snippet names the file relative to where it runs
    out = io.StringIO()
    call_command(*argv[2:], stdout=out, stderr=io.StringIO())
    assert "Imported 3 of 3 Mem0 memories for helper" in out.getvalue()
    assert Memory.objects.filter(owner__name="helper", category="mem0").count() == 3
