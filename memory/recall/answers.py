"""What a recall call answers — search, context, browse — from validated input, for the REST API
and the MCP server alike (siblings over this module, neither importing the other)."""

import time

from knowledge import names
from knowledge.errors import NotFound
from knowledge.models import Agent, Conversation
from knowledge.principal import Principal
from knowledge.replica import replica_reads
from memory.recall import ROUTES, memory_search, resolve_scope
from memory.recall.browse import Browser
from memory.recall.context import context_compile
from memory.recall.present import outcome_out
from memory.recall.search import query_vector_soon


def scope_from(principal: Principal, v: dict):
    """Resolve agent / conversation / channel names into a RecallScope (400 for unknown names,
    403/404 for what the caller may not see): the names through `names.scope_for`, who may
    search through `resolve_scope`."""
    named = names.scope_for(
        principal, agent=v["agent"], conversation=v.get("conversation"), channel=v.get("channel")
    )
    return resolve_scope(principal, agent=named.agent, conversation=named.conversation, channel=named.channel)


@replica_reads
def search_timed(principal: Principal, v: dict) -> tuple[dict, dict[str, float]]:
    """Run memory_search from validated `SearchIn` data: its JSON body and where its time went
    (`scope`, resolving the names and the scope, first). The query is embedded meanwhile (a
    refused search discards its vector)."""
    routes = tuple(v.get("routes") or ROUTES)
    query = query_vector_soon(v["q"], routes)
    started = time.perf_counter()
    scope = scope_from(principal, v)
    resolved = (time.perf_counter() - started) * 1000
    outcome = memory_search(
        scope,
        q=v["q"],
        k=v["k"],
        budget_tokens=v["budget_tokens"],
        now=v.get("now"),
        routes=routes,
        query=query,
    )
    return outcome_out(outcome), {"scope": resolved, **outcome.stages}


def search_for(principal: Principal, v: dict) -> dict:
    """The search's JSON body (the MCP server)."""
    return search_timed(principal, v)[0]


def browse_open(principal: Principal, *, kind: str, pk: int, conversation: int | None = None) -> dict:
    """Open the thing behind a result, inside `conversation`'s scope when one is named (404
    for an unknown conversation; what the principal may not see is refused by the Browser)."""
    conv = None
    if conversation:
        conv = Conversation.objects.select_related("agent").filter(pk=conversation).first()
        if conv is None:
            raise NotFound("No such conversation.")
    return Browser(principal, conv).open(kind, pk)


def context_for(principal: Principal, agent: Agent, v: dict) -> dict:
    """Compile `agent`'s context from validated `ContextIn` data, inside the scope `principal`
    may read (the API and the MCP server both compile through here)."""
    scope = scope_from(principal, {**v, "agent": agent.name})
    return context_compile(
        scope, q=v["q"], budget_tokens=v["budget_tokens"], now=v.get("now"), history_turns=v["history_turns"]
    )
