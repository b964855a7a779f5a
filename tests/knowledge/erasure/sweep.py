"""Helpers of the erasure sweep: every read path asked for a token, and the database's text."""

import json
from unittest import mock

from django.db import connection

from knowledge.portability.services import agent_export
from knowledge.principal import Principal
from memory.mcp.tools import RESOURCES, ToolRefused, call_tool, read_resource
from tests import factory

APPS = ("knowledge_", "memory_", "curation_")
TEXT_TYPES = ("text", "character varying", "json", "jsonb", "ARRAY")


def database_rows_holding(token: str) -> list[str]:
    """Every table.column of the apps' tables whose text, JSON or array value holds `token`: the
    database's own answer, whatever the code above it shows."""
    with connection.cursor() as cursor:
        return columns_holding(cursor, token)


def columns_holding(cursor, token: str) -> list[str]:
    """database_rows_holding over any DB-API cursor (a replica's, say)."""
    cursor.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND data_type = ANY(%s) "
        "AND (" + " OR ".join("table_name LIKE %s" for _ in APPS) + ")",
        [list(TEXT_TYPES), *[f"{a}%" for a in APPS]],
    )
    hits = []
    for table, column in cursor.fetchall():
        cursor.execute(
            f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s',  # noqa: S608
            [f"%{token}%"],
        )
        if cursor.fetchone()[0]:
            hits.append(f"{table}.{column}")
    return hits


def read_paths_holding(world, token: str, *, conversations=(), memory_ids=(), ids=None) -> list[str]:
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
    with mock.patch("memory.mcp.tools.close_old_connections"):
        for uri in RESOURCES:
            check(f"mcp resource {uri}", read_resource(agent, uri))
        for kind, refs in (ids or {}).items():
            for ref in refs:
                tool, args = (
                    ("material_status", {"material": ref})
                    if kind == "material"
                    else ("memory_browse", {"kind": kind, "id": ref})
                )
                try:
                    check(f"mcp {tool} {kind} {ref}", call_tool(agent, tool, args))
                except ToolRefused:  # gone, or not this agent's to see: nothing shown
                    pass
    check("export", "".join(agent_export(actor=factory.SYSTEM, agent=world.copilot)))
    check("event feed", admin.get("/api/events?limit=500").content.decode())
    check("audit trail", admin.get("/api/audit?page_size=200").content.decode())
    return hits


# Console and API pages that take no argument and change nothing on GET are asked as they are and
# with ?q=<token>; these few change the session (or are not pages), so they are left out.
NOT_PAGES = {"logout", "owner-select", "theme-set", "healthz", "schema", "api-docs"}

# The pages that show one row, by what they take: each is asked for every planted row of its kind.
PAGES_OF = {
    "memory": ["memory-detail", "api-memory-detail", "api-provenance"],
    "entry": [
        "entry-edit",
        "entry-projection",
        "entry-audit",
        "api-entry",
        "api-entry-projection",
        "api-entry-blocks",
    ],
    "material": ["material-page", "material-state", "api-material"],
    "conversation": ["api-conversation"],
    "event": ["audit-detail", "api-audit-event"],
    "agent": ["agent-detail", "agent-memo", "agent-skills", "guide-edit", "agent-export"],
}
BROWSED = ("memory", "entry", "message", "conversation", "episode")
SOURCE_KINDS = ("memory", "entry", "message", "conversation", "material")


def _routes():
    from django.urls import URLResolver, get_resolver

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            else:
                yield prefix + str(p.pattern), p.name

    return list(walk(get_resolver().url_patterns))


def pages_holding(world, token: str, ids: dict) -> list[str]:
    """Every console page and API GET, asked by the admin, whose answer holds `token`: every page
    that takes no argument (the header search, lists, Status, the review queue…) plain and with
    ?q=<token>, and every page of one row for each planted row (`ids`: kind -> ids, of memories,
    entries, materials, messages, conversations, episodes; the audit events and agents are
    taken from the database). Erased rows' pages may answer 404 or 410; none may hold "<token>-",
    the form every planted copy has."""
    from django.test import Client
    from django.urls import NoReverseMatch, reverse

    from knowledge.models import Agent, AuditEvent

    console = Client()
    console.force_login(world.admin)
    api = world.client("admin")
    ids = {k: list(v) for k, v in ids.items()}
    ids["event"] = list(AuditEvent.objects.order_by("-pk").values_list("pk", flat=True)[:400])
    ids["agent"] = list(Agent.objects.values_list("name", flat=True))
    urls = []
    for route, name in _routes():
        if "<" in route or name in NOT_PAGES or route.endswith(("/run", "/check")):
            continue
        urls += ["/" + route, f"/{route}?q={token}"]
    for kind, names in PAGES_OF.items():
        for name in names:
            for ref in ids.get(kind, ()):
                for key in ("pk", "memory_id", "entry_id", "material_id", "event_id", "name", "agent_name"):
                    try:
                        urls.append(reverse(name, kwargs={key: ref}))
                        break
                    except NoReverseMatch:
                        continue
    for kind in BROWSED:
        for ref in ids.get(kind, ()):
            urls += [f"/recall/browse/{kind}/{ref}", f"/api/memory/browse/{kind}/{ref}"]
    for kind in SOURCE_KINDS:
        for ref in ids.get(kind, ()):
            urls += [f"/sources/{kind}/{ref}", f"/api/sources/{kind}/{ref}"]
    hits = []
    for url in dict.fromkeys(urls):
        client = api if url.startswith("/api/") else console
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        # The query is the bare token; what was planted is the token with a suffix ("<token>-"),
        # so a page echoing its query ("Nothing matches for <token>") does not count.
        if f"{token}-".lower() in body.decode(errors="replace").lower():
            hits.append(url)
    return hits
