"""The rows a request names, resolved once at the edge: `scope_for` turns the agent name,
conversation id and channel name a request gives into rows. Names only; what the principal may do
with them is `knowledge.access`, which re-exports these (callers read `access.scope_for`)."""

from typing import NamedTuple

from knowledge.errors import Invalid, NotFound
from knowledge.models import Agent, Channel, Conversation
from knowledge.principals.principal import Principal


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
        conversation_row = Conversation.objects.select_related("channel").filter(pk=conversation).first()
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
