"""Helpers of the erasure sweep: every read path asked for a token, and the database's text."""

import json
from unittest import mock

from django.db import connection

from knowledge.portability.services import agent_export
from knowledge.principal import Principal
from memory.mcp.tools import ToolRefused, call_tool
from tests import factory

APPS = ("knowledge_", "memory_", "curation_")
TEXT_TYPES = ("text", "character varying", "json", "jsonb", "ARRAY")


def database_rows_holding(token: str) -> list[str]:
    """Every (table.column, id) of the apps' tables whose text, JSON or array value holds `token`:
    the database's own answer, whatever the code above it shows."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type = ANY(%s) "
            "AND (" + " OR ".join("table_name LIKE %s" for _ in APPS) + ")",
            [list(TEXT_TYPES), *[f"{a}%" for a in APPS]],
        )
        columns = cursor.fetchall()
        hits = []
        for table, column in columns:
            cursor.execute(
                f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s',  # noqa: S608
                [f"%{token}%"],
            )
            if cursor.fetchone()[0]:
                hits.append(f"{table}.{column}")
    return hits


def read_paths_holding(world, token: str, *, conversations=(), memory_ids=()) -> list[str]:
    """Each read path (REST search, context, list, details, browse, MCP, export, event feed) whose
    answer holds `token`, asked by the agent in each conversation and by the admin."""
    hits = []

    def check(name, body):
        if isinstance(body, str) and body.startswith("{"):
            try:
                body = json.loads(body)
            except ValueError:  # the export: one JSON document a line
                pass
        if isinstance(body, dict):  # a search or a context echoes its query; the rest must not
            body = {k: v for k, v in body.items() if k not in ("query", "q")}
        text = body if isinstance(body, str) else json.dumps(body, default=str)
        if token.lower() in text.lower():
            hits.append(name)

    agent_client, admin = world.client("copilot"), world.client("admin")
    agent = Principal.for_agent(world.copilot)
    for conv in conversations:
        body = {"agent": "copilot", "conversation": conv.pk, "q": token}
        check(
            f"search in {conv.pk}",
            agent_client.post("/api/memory/search", body, format="json").content.decode(),
        )
        context = {"conversation": conv.pk, "q": token, "budget_tokens": 2000}
        check(
            f"context in {conv.pk}",
            agent_client.post("/api/agents/copilot/context", context, format="json").content.decode(),
        )
        # The tools as the MCP server runs them; the test's transaction keeps its connection.
        with mock.patch("memory.mcp.tools.close_old_connections"):
            for tool, args in (
                ("memory_search", {"conversation": conv.pk, "q": token}),
                ("context_compile", context),
                ("memory_browse", {"kind": "conversation", "id": conv.pk}),
            ):
                try:
                    check(f"mcp {tool} in {conv.pk}", call_tool(agent, tool, args))
                except ToolRefused as refused:
                    hits.append(f"mcp {tool} refused: {refused}")
        check(f"messages of {conv.pk}", agent_client.get(f"/api/conversations/{conv.pk}").content.decode())
    for query in ("", "?status=erased", "?store=private:alice", "?q=" + token):
        check(f"list {query}", admin.get("/api/memory" + query).content.decode())
    for pk in memory_ids:
        check(f"detail {pk}", admin.get(f"/api/memory/{pk}").content.decode())
        check(f"browse {pk}", agent_client.get(f"/api/memory/browse/memory/{pk}").content.decode())
    check("export", "".join(agent_export(actor=factory.SYSTEM, agent=world.copilot)))
    check("event feed", admin.get("/api/events?limit=500").content.decode())
    check("audit trail", admin.get("/api/audit?page_size=200").content.decode())
    return hits
