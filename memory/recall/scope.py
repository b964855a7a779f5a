"""Who is recalling, and from where: the scope every route of a memory_search runs inside.

The scope is always computed *as the agent* — even when a reviewer asks in the recall
playground — so the playground shows exactly what the agent itself would get. Visibility comes
only from `knowledge.access` (`readable_q` for memories and entries, `message_readable_q` for
messages and episodes)."""

from collections import OrderedDict
from dataclasses import dataclass, field

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connection, models
from django.db.models import Q

from knowledge import access
from knowledge.errors import Invalid
from knowledge.models import Agent, Channel, Conversation, Episode, Message
from knowledge.principal import Principal


class NothingVisible(Exception):
    """The scope admits no row of this kind: a route has no candidates."""


# Compiled visibility filters by (model, filter): the same few scopes come back search after
# search, and compiling one through the ORM costs ≈ 0.5 ms of CPU (four per search).
_compiled: OrderedDict = OrderedDict()
COMPILED_MAX = 1024


def _key(value):
    """A hashable, exact description of a Q (or one of its values), or None when a value is
    not one we can describe exactly (then the filter is compiled every time)."""
    if isinstance(value, Q):
        children = tuple(_key(child) for child in value.children)
        return None if None in children else ("Q", value.connector, value.negated, children)
    if isinstance(value, models.Model):
        return (value._meta.label, value.pk) if value.pk is not None else None
    if isinstance(value, (list, tuple)):
        items = tuple(_key(v) for v in value)
        return None if None in items else (type(value).__name__, items)
    if value is None or isinstance(value, (str, int, float, bool)):
        return (type(value).__name__, value)
    return None


def compiled_where(model, q: Q) -> tuple[str, list] | None:
    """`q` on `model` as SQL on its bare table name, with its parameters; ("TRUE", []) when it
    admits everything and None when it admits nothing."""
    key = _key(q)
    if key is not None:
        key = (model._meta.label, key)
        hit = _compiled.get(key, False)
        if hit is not False:
            try:
                _compiled.move_to_end(key)
            except KeyError:  # evicted meanwhile by another thread: the value we hold is still right
                pass
            return None if hit is None else (hit[0], list(hit[1]))
    query = model.objects.filter(q).query
    try:
        sql, params = query.get_compiler(connection=connection).compile(query.where)
        result = (sql, tuple(params))
    except FullResultSet:
        result = ("TRUE", ())
    except EmptyResultSet:
        result = None
    if key is not None:
        _compiled[key] = result
        while len(_compiled) > COMPILED_MAX:
            try:
                _compiled.popitem(last=False)
            except KeyError:  # emptied meanwhile by another thread
                break
    return None if result is None else (result[0], list(result[1]))


@dataclass
class RecallScope:
    agent: Agent
    conversation: Conversation  # unsaved when the scope was previewed for a channel
    knowledge_q: Q  # memories and entries the agent may read here
    message_q: Q  # messages and episodes the agent may read here
    _where: dict = field(default_factory=dict, repr=False)

    def where(self, model) -> tuple[str, list]:
        """The visibility filter for `model` as SQL on its bare table name (compiled once per
        scope from the access-layer Q; raw route queries splice it in). Raises NothingVisible."""
        if model not in self._where:
            q = self.message_q if model in (Message, Episode) else self.knowledge_q
            self._where[model] = compiled_where(model, q)
        if self._where[model] is None:
            raise NothingVisible
        return self._where[model]

    @property
    def channel(self) -> Channel:
        return self.conversation.channel

    def describe(self) -> dict:
        return {
            "agent": self.agent.name,
            "conversation": self.conversation.pk,
            "channel": self.channel.name if self.conversation.channel_id else None,
            "thread": self.conversation.thread,
            "read_stores": list(self.conversation.read_stores),
            "write_store": self.conversation.write_store,
        }


def store_scope(agent: Agent, store: str) -> RecallScope:
    """The scope of a turn that writes into `store`, outside any channel: what the agent reads
    there (private:P reads shared + self + private:P; channel:C reads channel:C + self; anything
    else reads shared + self) — used by the eval gate to compile a case's context."""
    if store.startswith("private:"):
        read = [access.SHARED, access.SELF, store]
    elif store.startswith("channel:"):
        read = [store, access.SELF]
    else:
        read = [access.SHARED, access.SELF]
    conversation = Conversation(agent=agent, read_stores=read, write_store=store)
    as_agent = Principal.for_agent(agent)
    return RecallScope(
        agent=agent,
        conversation=conversation,
        knowledge_q=access.readable_q(as_agent, conversation=conversation),
        message_q=access.message_readable_q(as_agent, conversation=conversation),
    )


def resolve_scope(
    principal: Principal,
    *,
    agent: Agent,
    conversation: Conversation | None = None,
    channel: Channel | None = None,
) -> RecallScope:
    """The scope of a search by `principal` for `agent`, set by a conversation (its fixed
    stores) or by a channel (the stores a conversation opened there now would get).

    Who may search where is `access.check_search`: agents only as themselves and where they
    take part; reviewers and admins through any agent's eyes (the recall playground)."""
    access.check_search(principal, agent=agent, conversation=conversation, channel=channel)
    if conversation is not None:
        if channel is not None and channel.pk != conversation.channel_id:
            raise Invalid({"channel": ["The conversation is in another channel."]})
    elif channel is not None:
        read, write = access.conversation_scope(channel)
        conversation = Conversation(agent=agent, channel=channel, read_stores=read, write_store=write)
    else:
        raise Invalid({"conversation": ["Give a conversation or a channel."]})
    as_agent = Principal.for_agent(agent)
    return RecallScope(
        agent=agent,
        conversation=conversation,
        knowledge_q=access.readable_q(as_agent, conversation=conversation),
        message_q=access.message_readable_q(as_agent, conversation=conversation),
    )
