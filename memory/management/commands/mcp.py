"""`manage.py mcp --token …`: serve Brain's MCP tools over stdio to a local agent, acting as
the agent whose API token is given (or BRAIN_TOKEN). stdout carries the protocol only.

A missing or bad token is told to the client before the command exits: every request it sends
(`server/discover`, `initialize`) is answered with a JSON-RPC error saying "invalid or missing
Brain agent token" and why, so the host shows that instead of "Connection closed"."""

import json
import os
import sys
import threading
from types import SimpleNamespace

import anyio
from django.core.management.base import BaseCommand, CommandError
from mcp.server.stdio import stdio_server
from rest_framework import exceptions

from knowledge.principals.auth import token_authenticate
from knowledge.web import error_text
from memory.mcp.http import TOKEN_PROBLEM_SENTENCE
from memory.mcp.server import build_server

# A JSON-RPC error code in the range the spec leaves to servers: the token was refused.
TOKEN_REFUSED = -32001
# How long a refused start waits for the client's handshake before it exits anyway.
REFUSAL_WAIT_SECONDS = 30


def _agent_of(token: str, error: type[Exception]):
    """The agent principal of `token`; `error` with the API's message otherwise."""
    try:
        # A local process: bad tokens count against the loopback address.
        principal, _ = token_authenticate(token, SimpleNamespace(META={"REMOTE_ADDR": "127.0.0.1"}))
    except exceptions.APIException as exc:
        raise error(error_text(exc))
    if not principal.is_agent:
        raise error("The MCP server serves agent tokens only.")
    return principal


class Command(BaseCommand):
    help = "Serve the MCP server over stdio for the agent of an API token."

    def add_arguments(self, parser):
        parser.add_argument("--token", help="The agent's API token (default: $BRAIN_TOKEN).")

    def handle(self, *args, token=None, **options):
        token = token or os.environ.get("BRAIN_TOKEN")
        try:
            if not token:
                raise CommandError("Give the agent's API token: --token … or BRAIN_TOKEN.")
            principal = _agent_of(token, CommandError)
        except CommandError as exc:
            _refuse_handshake(f"{TOKEN_PROBLEM_SENTENCE}: {exc}")
            raise

        def principal_for(ctx):
            # Looked up for every call (one indexed query), so revoking the token stops it at once.
            return _agent_of(token, exceptions.AuthenticationFailed)

        assert principal.is_agent
        server = build_server(principal_for)

        async def serve():
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)


def _refuse_handshake(message: str) -> None:
    """Answer the client's requests on stdin with the refusal until it has heard it in answer to
    `initialize` (or closes stdin, or REFUSAL_WAIT_SECONDS pass). A person at a terminal gets
    the error alone, without the wait."""
    try:
        if sys.stdin.isatty():
            return
    except (AttributeError, OSError, ValueError):
        return  # no usable stdin: no client to tell
    done = threading.Event()

    def answer():
        stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
        try:
            for line in iter(stdin.readline, b""):
                try:
                    request = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(request, dict) or "id" not in request or "method" not in request:
                    continue  # a notification or an answer: nothing to reply to
                error = {"code": TOKEN_REFUSED, "message": message, "data": {"status": 401}}
                stdout.write(
                    json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}).encode() + b"\n"
                )
                stdout.flush()
                if request["method"] == "initialize":
                    break
        except (OSError, ValueError):
            pass  # stdin or stdout closed under us: no client to tell
        finally:
            done.set()

    threading.Thread(target=answer, daemon=True).start()
    done.wait(REFUSAL_WAIT_SECONDS)
