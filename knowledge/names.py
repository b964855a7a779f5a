"""The rows a request names, resolved once at the edge: `scope_for` turns the agent name,
conversation id and channel name a request gives into rows, `write_target` what a memory write
names, `agent_named` / `skill_named` / `channel_named` the one row a URL names (404 when there is
none), `owner_selected` the console's owner selector. Names only; what the principal may do
with them is `knowledge.access`; callers read these here (`names.scope_for`). Views,
API views, serializers, forms and MCP tools look no row up by name themselves
(tests/test_architecture.py checks it)."""

from typing import NamedTuple

from knowledge import rowsql
from knowledge.errors import Invalid, NotFound
from knowledge.models import Agent, Channel, Conversation, Integration, Memory, Person, Skill
from knowledge.principal import Principal
from knowledge.replica import read_connection
from knowledge.stores import parse_scope


def owner_selected(name: str | None) -> Agent | None:
    """The agent a console owner selector or an owner filter names (the session's `owner`, an
    `owner` or `agent` field): None for an empty name or an unknown one — for the selector, an
    agent gone since it was chosen means none is selected; a caller that must have an agent says
    so in its own words."""
    return Agent.objects.filter(name=name).first() if name else None


def agent_named(name: str) -> Agent:
    """The agent a URL names; NotFound (404) when there is none. Who may act on it is the
    caller's check (`access.agent_get_for` for a token that may name only itself)."""
    agent = Agent.objects.filter(name=name).first()
    if agent is None:
        raise NotFound("No Agent matches the given query.")
    return agent


def skill_named(name: str) -> Skill:
    """The skill a URL or a request names; NotFound (404) when there is none."""
    skill = Skill.objects.filter(name=name).first()
    if skill is None:
        raise NotFound(f"There is no skill named {name}.", skill=name)
    return skill


def channel_named(name: str) -> Channel:
    """The channel a URL or a query names; NotFound (404) when there is none."""
    channel = Channel.objects.filter(name=name).select_related("person").first()
    if channel is None:
        raise NotFound("No Channel matches the given query.")
    return channel


def channels_named(names) -> dict[str, Channel]:
    """The channels a batch of messages names, by name; unknown names are Invalid, all at once."""
    names = set(names)
    found = {c.name: c for c in Channel.objects.filter(name__in=names).select_related("person")}
    unknown = sorted(names - set(found))
    if unknown:
        raise Invalid({"channel": [f"Unknown channel(s): {', '.join(unknown)}."]})
    return found


class Named(NamedTuple):
    """The agent, conversation and channel a request names (None where it names none)."""

    agent: Agent | None
    conversation: Conversation | None
    channel: Channel | None


def scope_for(
    principal: Principal,
    *,
    agent: str | None = None,
    conversation: int | None = None,
    channel: str | None = None,
    agent_field: str = "agent",
) -> Named:
    """Resolve the agent name, conversation id and channel name a request gives into rows: an
    unknown agent or channel name is Invalid naming its field (both at once), an unknown
    conversation NotFound. Who may act on them is the caller's check (`check_join`,
    `check_write`, recall's scope). An agent naming itself gets the agent of its token (no
    query); a conversation of the named agent carries that agent. `agent_field` names the
    request's field for the agent where it is not `agent` (a consolidation's `owner`)."""
    errors, agent_row, conversation_row, channel_row = {}, None, None, None
    if agent is not None:
        own = principal.agent if principal.is_agent else None
        agent_row = own if own is not None and own.name == agent else Agent.objects.filter(name=agent).first()
        if agent_row is None:
            errors[agent_field] = [f"Unknown agent {agent}."]
    if conversation and not errors:
        conversation_row = _conversation_with_channel(conversation)
        if conversation_row is None:
            raise NotFound("No Conversation matches the given query.")
        if agent_row is not None and conversation_row.agent_id == agent_row.pk:
            conversation_row.agent = agent_row
    if channel:
        channel_row = Channel.objects.filter(name=channel).select_related("person").first()
        if channel_row is None:
            errors["channel"] = [f"Unknown channel {channel}."]
    if errors:
        raise Invalid(errors)
    return Named(agent_row, conversation_row, channel_row)


def _conversation_with_channel(pk: int) -> Conversation | None:
    """The conversation `pk` with its channel, as select_related("channel") builds them, or None.
    Plain SQL from the models (knowledge.rowsql), on the connection reads go to: every search
    resolves its conversation here, and the ORM's compilation of the query was most of its cost
    (in-process, 500 lookups, load 4: 0.85 ms of CPU each through the ORM, 0.19 ms so). Same run
    against main over HTTP (`python -m bench.peers_ab ab --rounds 2`, 764 searches, load 3.8): the
    search's scope stage p50 4.24 → 2.93 ms."""
    width = rowsql.width(Conversation)
    sql = (
        f"SELECT {rowsql.columns(Conversation, 't')}, {rowsql.columns(Channel, 'c')} "
        f"FROM {Conversation._meta.db_table} t JOIN {Channel._meta.db_table} c ON c.id = t.channel_id "
        f"WHERE t.id = %s"
    )
    with read_connection().cursor() as cursor:
        cursor.execute(sql, [pk])
        row = cursor.fetchone()
    if row is None:
        return None
    conversation = rowsql.from_row(Conversation, row[:width])
    conversation.channel = rowsql.from_row(Channel, row[width:])
    return conversation


def _acting_agent(principal: Principal, name: str | None, errors: dict) -> Agent | None:
    """The agent a write or report names in its `agent` field: an agent token's own by default
    (no query when it names itself); an unknown name, or none from another token, goes into
    `errors`."""
    if name is None:
        if principal.is_agent:
            return principal.agent
        errors["agent"] = ["This field is required for tokens that are not an agent's."]
        return None
    if principal.is_agent and name == principal.agent.name:
        return principal.agent
    row = Agent.objects.filter(name=name).first()
    if row is None:
        errors["agent"] = [f"There is no agent named {name}."]
    return row


class WriteTarget(NamedTuple):
    """The rows a memory write names: its owner agent and store, and the memory it supersedes
    and the conversation it comes from (None where it names none)."""

    owner: Agent
    store: str
    supersedes: Memory | None
    conversation: Conversation | None


def write_target(
    principal: Principal,
    *,
    scope: str,
    agent: str | None = None,
    supersedes: int | None = None,
    conversation: int | None = None,
) -> WriteTarget:
    """Resolve what a memory write names — the scope (`agent`, `shared`, `private:<person>`,
    `channel:<channel>`), the owner agent (an agent token names only itself, and is the default
    owner), the superseded memory and the conversation by id — into rows, every unknown name
    reported at once (Invalid). Whether the writer may write there, supersede that memory or
    cite that conversation is the write service's check (`access.check_write` and the rest)."""
    errors = {}
    store = ""
    try:
        store = parse_scope(scope)
    except Invalid as exc:
        errors.update(exc.detail)
    if store.startswith("private:") and not Person.objects.filter(name=store[8:]).exists():
        errors["scope"] = [f"There is no person named {store[8:]}."]
    if store.startswith("channel:") and not Channel.objects.filter(name=store[8:]).exists():
        errors["scope"] = [f"There is no channel named {store[8:]}."]
    owner = _acting_agent(principal, agent, errors)
    target = None
    if supersedes is not None:
        target = Memory.objects.select_related("owner").filter(pk=supersedes).first()
        if target is None:
            errors["supersedes"] = [f"There is no memory {supersedes} you can see."]
    conversation_row = None
    if conversation is not None:
        conversation_row = Conversation.objects.filter(pk=conversation).first()
        if conversation_row is None or owner is None or conversation_row.agent_id != owner.pk:
            errors["conversation"] = [f"Agent {agent or owner} has no conversation {conversation}."]
    if errors:
        raise Invalid(errors)
    return WriteTarget(owner, store, target, conversation_row)


WRITE_NAMES = ("scope", "agent", "supersedes", "conversation")


def write_named(principal: Principal, data: dict) -> dict:
    """A parsed memory write request (API, MCP) with the names it carries resolved into rows
    (write_target): the keyword arguments of the write service."""
    target = write_target(principal, **{name: data[name] for name in WRITE_NAMES if name in data})
    return {**target._asdict(), **{k: v for k, v in data.items() if k not in WRITE_NAMES}}


def integrations_named(names: list[str]) -> list[Integration]:
    """The integrations a request names, in its order; unknown names are Invalid, all at once."""
    found = {i.name: i for i in Integration.objects.filter(name__in=names)}
    unknown = sorted(set(names) - set(found))
    if unknown:
        raise Invalid({"integrations": [f"Unknown integration(s): {', '.join(unknown)}."]})
    return [found[name] for name in dict.fromkeys(names)]


def grant_target(*, integration: str, agent: str) -> tuple[Integration, Agent]:
    """The integration and agent a connector grant names; unknown names are Invalid, both at
    once."""
    errors = {}
    integration_row = Integration.objects.filter(name=integration).first()
    if integration_row is None:
        errors["integration"] = [f"There is no integration named {integration}."]
    agent_row = Agent.objects.filter(name=agent).first()
    if agent_row is None:
        errors["agent"] = [f"There is no agent named {agent}."]
    if errors:
        raise Invalid(errors)
    return integration_row, agent_row


class OutcomeTarget(NamedTuple):
    """The rows a task outcome report names."""

    agent: Agent
    skill: Skill
    conversation: Conversation | None


def outcome_target(
    principal: Principal, *, skill: str, agent: str | None = None, conversation: int | None = None
) -> OutcomeTarget:
    """Resolve what a task outcome report names — the agent (an agent token reports for itself
    by default), the skill, the conversation by id (one of the agent's) — into rows, every
    unknown name reported at once (Invalid)."""
    errors = {}
    agent_row = _acting_agent(principal, agent, errors)
    skill_row = Skill.objects.filter(name=skill).first()
    if skill_row is None:
        errors["skill"] = [f"There is no skill named {skill}."]
    conversation_row = None
    if conversation is not None:
        conversation_row = Conversation.objects.filter(pk=conversation).first()
        if conversation_row is None or (agent_row is not None and conversation_row.agent_id != agent_row.pk):
            errors["conversation"] = [f"No conversation {conversation} of this agent."]
    if errors:
        raise Invalid(errors)
    return OutcomeTarget(agent_row, skill_row, conversation_row)
