"""`manage.py mcp --token …`: serve Brain's MCP tools over stdio to a local agent, acting as
the agent whose API token is given (or BRAIN_TOKEN). stdout carries the protocol only."""

import os
from types import SimpleNamespace

import anyio
from django.core.management.base import BaseCommand, CommandError
from mcp.server.stdio import stdio_server
from rest_framework import exceptions

from knowledge.principals.auth import token_authenticate
from knowledge.web import error_text
from memory.mcp.server import build_server


def _agent_of(token: str, error: type[Exception]):
    """The agent principal of `token`; `error` with the API's message otherwise."""
    try:
        # A local process: bad tokens count against the loopback address.
        principal, _ = token_authenticate(token, SimpleNamespace(META={"REMOTE_ADDR": "127.0.0.1"}))
    except exceptions.APIException as exc:
        raise error(error_text(exc))
    if principal.kind != "agent":
        raise error("The MCP server serves agent tokens only.")
    return principal


class Command(BaseCommand):
    help = "Serve the MCP server over stdio for the agent of an API token."

    def add_arguments(self, parser):
        parser.add_argument("--token", help="The agent's API token (default: $BRAIN_TOKEN).")

    def handle(self, *args, token=None, **options):
        token = token or os.environ.get("BRAIN_TOKEN")
        if not token:
            raise CommandError("Give the agent's API token: --token … or BRAIN_TOKEN.")
        principal = _agent_of(token, CommandError)

        def principal_for(ctx):
            # Looked up for every call (one indexed query), so revoking the token stops it at once.
            return _agent_of(token, exceptions.AuthenticationFailed)

        assert principal.kind == "agent"
        server = build_server(principal_for)

        async def serve():
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
