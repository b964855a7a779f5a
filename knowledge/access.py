"""The one access module: which stores a principal (in a conversation, or browsing) may read,
where it may write, every `*_get_for`, and who is asking. Console views, API views, MCP, search
and exports all go through here; no other module asks what kind a principal is (the Principal
type keeps it private).

Stores are named in `knowledge.stores`. Every item also has an owner agent; `self` and
`private:*` items are visible only to their owner agent, `shared` and `channel:*` items to every
agent that reads them."""

from typing import NamedTuple

from django.db import connection
from django.db.models import Q

from knowledge.errors import Invalid, NotFound, Refused
from knowledge.memories.fingerprints import EXTERNAL_KINDS
from knowledge.models import (
    Agent,
    Channel,
    ConnectorGrant,
    Conversation,
    CurationGuide,
    Entry,
    Episode,
    Material,
    Memory,
    Message,
    TaskOutcome,
)
from knowledge.names import agent_named, owner_selected
from knowledge.principal import ADMIN, REVIEWER, Principal
from knowledge.refs import refs_among
from knowledge.stores import (  # noqa: F401  (the store vocabulary, read through access everywhere)
    OWNER_ONLY_PREFIXES,
    SCOPE_ALIASES,
    SELF,
    SHARED,
    channel_store,
    channels_holding,
    conversation_scope,
    message_store,
    parse_scope,
    private_store,
)

# --- who is asking --------------------------------------------------------------------------
# Outside this module and the Principal type's own predicates (`is_agent`, `is_integration`,
# `is_person`, `is_reviewer`, `is_admin`), no module compares a principal's kind.


def is_agent_other_than(principal: Principal, agent_id: int | None) -> bool:
    """An agent's token asking about another agent's object (an agent's own, or anyone else's
    principal, is False)."""
    return principal.is_agent and principal.agent.pk != agent_id


def own_agent(principal: Principal) -> Agent | None:
    """The agent of an agent's token; None for anyone else."""
    return principal.agent if principal.is_agent else None


def another_agents(what: str) -> Refused:
    """The one refusal for an object an agent asks about that is another agent's."""
    return Refused(f"{what} belongs to another agent.")


# Reviewers review; admins do all reviewers do, and manage; background jobs hold both. Every role
# gate (console decorator, DRF permission class, service, view) is `require_role` or `has_role`.
ROLE_REFUSALS = {REVIEWER: "Reviewers and admins only.", ADMIN: "Admins only."}


def has_role(principal: Principal, role: str, *, person: bool = False) -> bool:
    """Whether `principal` holds `role` (REVIEWER or ADMIN); with `person`, only a person's role
    counts (never a background job's). Agents and integrations hold none."""
    if role not in ROLE_REFUSALS:
        raise ValueError(f"No role {role}.")
    if person and not principal.is_person:
        return False
    return principal.is_admin if role == ADMIN else principal.is_reviewer


def require_role(
    principal: Principal, role: str, refusal: str | None = None, *, person: bool = False
) -> None:
    """Raise Refused (saying `refusal`, or who may) unless `principal` holds `role` (`has_role`)."""
    if not has_role(principal, role, person=person):
        raise Refused(refusal or ROLE_REFUSALS[role])


def _store_q(store: str, agent: Agent, prefix: str) -> Q:
    q = Q(**{f"{prefix}store": store})
    if store == SELF or store.startswith("private:"):
        q &= Q(**{f"{prefix}owner": agent})
    return q


# --- Who may join and post -------------------------------------------------------------------
# An agent takes part in a channel by opening a conversation there. Shared channels (either
# routing rule) are open to every agent of the workspace. A direct message belongs to one agent
# and one person: only that agent ever has conversations in it (an admin may open one on that
# agent's behalf), and only that agent, an integration taking part in the channel, or an admin
# posts messages to it. The read paths below also ignore any conversation an agent has in
# another agent's direct message, so no older row can open one.


def _own_conversations_q(agent: Agent, prefix: str = "") -> Q:
    """Conversations of `agent` that give it a part in their channel: everywhere but in another
    agent's direct message."""
    return Q(**{f"{prefix}agent": agent}) & (
        ~Q(**{f"{prefix}channel__kind": Channel.KIND_DM}) | Q(**{f"{prefix}channel__agent": agent})
    )


def joined_channels(agent: Agent):
    """The channels `agent` takes part in (has a conversation in that counts)."""
    return Channel.objects.filter(
        pk__in=Conversation.objects.filter(_own_conversations_q(agent)).values("channel")
    )


def _conversation_write_stores(agent: Agent) -> list[str]:
    return list(
        Conversation.objects.filter(_own_conversations_q(agent))
        .values_list("write_store", flat=True)
        .distinct()
    )


def check_join(principal: Principal, *, agent: Agent, channel: Channel) -> None:
    """Raise Refused unless `principal` may open a conversation for `agent` in
    `channel`: agents only for themselves, admins for any agent; in a direct message only for
    the agent it belongs to."""
    if principal.is_agent:
        if principal.agent.pk != agent.pk:
            raise Refused("An agent may open conversations only for itself.")
    elif not principal.is_admin:
        raise Refused("Only agents and admins may open conversations.")
    if channel.kind == Channel.KIND_DM and channel.agent_id != agent.pk:
        if channel.agent_id is None:
            raise Refused(f"The direct message {channel.name} belongs to no agent yet.")
        raise another_agents(f"The direct message {channel.name}")


def takes_part(agent: Agent, channel: Channel) -> bool:
    """Whether `agent` takes part in `channel`: its own direct message, or a shared channel it
    opened a conversation in."""
    if channel.kind == Channel.KIND_DM:
        return channel.agent_id == agent.pk
    return Conversation.objects.filter(agent=agent, channel=channel).exists()


def agent_stores(agent: Agent) -> list[str]:
    """Every store an agent may browse outside a conversation: shared, its self store, the
    private stores of the people it has talked to directly, and the channel-only stores of the
    channels it takes part in."""
    stores = [SHARED, SELF]
    for channel in joined_channels(agent).select_related("person"):
        read, _ = conversation_scope(channel)
        stores.extend(s for s in read if s not in stores)
    stores.extend(s for s in _conversation_write_stores(agent) if s not in stores)
    return stores


def readable_q(principal: Principal, *, conversation: Conversation | None = None, prefix: str = "") -> Q:
    """A filter for the items `principal` may read. In a conversation an agent reads exactly the
    stores fixed on that conversation; people with a role read everything; integrations nothing."""
    nothing = Q(pk__in=[])
    if principal.is_agent:
        agent = principal.agent
        if conversation is not None:
            if conversation.agent_id != agent.pk:
                return nothing
            stores = conversation.read_stores
        else:
            stores = agent_stores(agent)
        q = nothing
        for store in stores:
            q |= _store_q(store, agent, prefix)
        return q
    if principal.is_reviewer:
        if conversation is not None:
            q = nothing
            for store in conversation.read_stores:
                q |= _store_q(store, conversation.agent, prefix)
            return q
        return Q()
    return nothing


def memory_readable_q(
    principal: Principal, *, conversation: Conversation | None = None, prefix: str = ""
) -> Q:
    """`readable_q` for memories, and unreviewed is unseen: a queued memory is read by its
    writer (the agent that owns it) and by people with a role, never by another agent."""
    q = readable_q(principal, conversation=conversation, prefix=prefix)
    if principal.is_agent:
        q &= ~Q(**{f"{prefix}status": Memory.QUEUED}) | Q(**{f"{prefix}owner": principal.agent})
    return q


def memory_ids_readable(principal: Principal, ids) -> set[int]:
    """Of the memory ids `ids`, those `principal` may read (one query; none for an empty list)."""
    ids = {pk for pk in ids if pk is not None}
    if not ids or principal.is_reviewer:  # people with a role read every memory
        return ids
    return set(Memory.objects.filter(memory_readable_q(principal), pk__in=ids).values_list("pk", flat=True))


def can_read_store(principal: Principal, *, owner: Agent, store: str) -> bool:
    if principal.is_reviewer:
        return True
    if not principal.is_agent:
        return False
    stores = agent_stores(principal.agent)
    if store not in stores:
        return False
    return principal.agent.pk == owner.pk or not store.startswith(OWNER_ONLY_PREFIXES)


def writable_stores(agent: Agent) -> list[str]:
    """Stores an agent may write into on its own behalf: shared, self, and the stores of the
    conversations it has had (a DM's private store, a channel-only store)."""
    stores = [SHARED, SELF]
    stores.extend(s for s in _conversation_write_stores(agent) if s not in stores)
    return stores


def check_write(principal: Principal, *, owner: Agent, store: str) -> None:
    """Raise Refused unless `principal` may write an item owned by `owner` into
    `store`. Agents write only as themselves; reviewers and admins may write for any agent."""
    if principal.is_agent:
        if principal.agent.pk != owner.pk:
            raise Refused("An agent may write only as itself.")
        # shared and self are always writable: skip the query on the hot write path.
        if store not in (SHARED, SELF) and store not in writable_stores(owner):
            raise Refused(f"Agent {owner.name} may not write into the store {store}.")
        return
    if principal.is_reviewer:
        return
    raise Refused("This token may not write memory.")


# --- Messages and episodes (evidence) ---------------------------------------------------------
# A message keeps the store its channel had when it arrived (`message_store`). An agent reads a
# message when it takes part in the message's channel (has a conversation there) and, inside a
# conversation, only when the message's channel is the conversation's channel or the message's
# store is one the conversation reads. So a DM's messages are read only in that DM (or another DM
# with the same person), a channel-only channel's only in that channel, and shared channels'
# messages in any conversation that reads `shared`. Episodes follow the same rule.


def _participating_channels(agent: Agent) -> list[tuple[int, str, str, str | None]]:
    """(id, kind, name, person name) of every channel `agent` takes part in (a conversation in
    another agent's direct message does not count). Plain SQL: it runs in
    every search, and compiling the ORM query cost more than running it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT c.id, c.kind, c.name, p.name FROM knowledge_channel c "
            "JOIN knowledge_conversation v ON v.channel_id = c.id "
            "LEFT JOIN knowledge_person p ON p.id = c.person_id "
            "WHERE v.agent_id = %s AND (c.kind <> %s OR c.agent_id = v.agent_id)",
            [agent.pk, Channel.KIND_DM],
        )
        return cursor.fetchall()


def message_readable_q(
    principal: Principal, *, conversation: Conversation | None = None, prefix: str = ""
) -> Q:
    """A filter for the messages (or episodes) `principal` may read — in `conversation` when one
    is given (it may be unsaved: a scope preview for a channel). People with a role read
    everything outside a conversation; integrations read nothing. Channel ids are spelled out
    (not a subquery) so PostgreSQL can use the channel indexes."""
    nothing = Q(pk__in=[])
    if principal.is_agent:
        agent = principal.agent
        if conversation is not None and conversation.agent_id != agent.pk:
            return nothing
    elif principal.is_reviewer:
        if conversation is None:
            return Q()
        agent = conversation.agent
    else:
        return nothing
    channels = _participating_channels(agent)
    if conversation is None:
        return Q(**{f"{prefix}channel_id__in": [c[0] for c in channels]})
    stores = list(conversation.read_stores)
    others = [pk for pk in channels_holding(channels, stores) if pk != conversation.channel_id]
    q = Q(**{f"{prefix}channel_id__in": others, f"{prefix}store__in": stores}) if others else nothing
    if conversation.channel_id is not None and (
        any(c[0] == conversation.channel_id for c in channels) or not _foreign_dm(conversation, agent)
    ):
        q |= Q(**{f"{prefix}channel_id": conversation.channel_id})
    return q


def _foreign_dm(conversation: Conversation, agent: Agent) -> bool:
    channel = conversation.channel
    return channel.kind == Channel.KIND_DM and channel.agent_id != agent.pk


# --- search and browse ------------------------------------------------------------------------


def check_search(
    principal: Principal,
    *,
    agent: Agent,
    conversation: Conversation | None = None,
    channel: Channel | None = None,
) -> None:
    """Raise Refused unless `principal` may search as `agent` in its `conversation` (or,
    previewing, in `channel`): an agent only as itself and only in a channel it takes part in
    (`takes_part`: a direct message is its own agent's, whatever conversation rows say);
    reviewers and admins through any agent's eyes (the recall playground); integrations never."""
    if principal.is_agent:
        if principal.agent.pk != agent.pk:
            raise Refused("An agent may search only its own memory.")
    elif not principal.is_reviewer:
        raise Refused("This token may not search memory.")
    if conversation is not None:
        # A conversation row left in another agent's DM is searched and reads nothing of that DM
        # (`readable_q`, `message_readable_q`).
        if conversation.agent_id != agent.pk:
            raise Refused(f"Conversation {conversation.pk} is not a conversation of {agent.name}.")
    elif channel is not None and principal.is_agent and not takes_part(agent, channel):
        raise Refused(f"{agent.name} takes no part in {channel.name}: open a conversation there first.")


class BrowseScope(NamedTuple):
    """What a principal may open behind search results (memory_browse)."""

    knowledge_q: Q  # memories and entries
    message_q: Q  # messages and episodes

    def visible_q(self, model) -> Q:
        return self.message_q if model in (Message, Episode) else self.knowledge_q


def browse_scope(principal: Principal, conversation: Conversation | None = None) -> BrowseScope:
    """Agents browse what they read (in a conversation: their own, and what it reads); people
    with a role everything (in a conversation, what it reads); integrations nothing."""
    if not (principal.is_agent or principal.is_reviewer):
        raise Refused("This token may not browse memory.")
    if conversation is not None:
        check_own_conversation(principal, conversation)
    return BrowseScope(
        readable_q(principal, conversation=conversation),
        message_readable_q(principal, conversation=conversation),
    )


def can_post_message(principal: Principal, channel: Channel) -> bool:
    """Integrations and agents post to channels they take part in (a direct message: only its
    own agent); admins to any channel."""
    if principal.is_admin:
        return True
    if principal.is_agent:
        return takes_part(principal.agent, channel)
    if principal.is_integration:
        return channel.integrations.filter(integration=principal.integration).exists()
    return False


def check_connector_write(
    principal: Principal, *, owner: Agent | None = None, store: str = "", document=None
) -> None:
    """Raise Refused unless `principal` may mirror a connector document for `owner` into `store`
    (when given) and change or withdraw `document` (a Material, when it exists): admins always;
    an integration only into a store an admin granted it (a ConnectorGrant for that agent and
    store) and only documents it mirrored itself."""
    if principal.is_admin:
        return
    if not principal.is_integration:
        raise Refused("Only integrations and admins mirror connector documents.")
    if document is not None and document.integration_id != principal.integration.pk:
        raise Refused(
            f"{document.source_ref} is mirrored by another integration; only it (or an admin) changes or "
            "withdraws it."
        )
    granted = ConnectorGrant.objects.filter(integration=principal.integration, agent=owner, store=store)
    if owner is not None and not granted.exists():
        raise Refused(
            f"Integration {principal.name} has no grant to mirror documents into the store {store} of "
            f"agent {owner.name}; an admin grants it (connector grants)."
        )


def report_item_visible(
    principal: Principal, *, agent: str | None = None, channel: str | None = None
) -> bool:
    """Whether a listed item of a health report (GET /api/status) that names an agent or a
    channel is shown to `principal`: people with a role see every item; an agent only its own
    and those of the channels it takes part in; an integration those of its channels."""
    if principal.is_reviewer:
        return True
    if agent is not None:
        return principal.is_agent and principal.agent.name == agent
    if channel is not None:
        if principal.is_agent:
            return (
                joined_channels(principal.agent).filter(name=channel).exists()
                or Channel.objects.filter(name=channel, kind=Channel.KIND_DM, agent=principal.agent).exists()
            )
        if principal.is_integration:
            return Channel.objects.filter(
                name=channel, integrations__integration=principal.integration
            ).exists()
    return False


def check_speaker(principal: Principal, *, agent_id: int, name: str) -> None:
    """Raise Refused unless `principal` may post a message whose speaker is the agent `agent_id`:
    an agent speaks only as itself (it reports the people it talks to as themselves); an admin or
    an integration speaks for people, never for an agent — else the words would read as that
    agent's own turn in its context. Background jobs (`system`) post the turns they replay."""
    if principal.is_system:
        return
    if principal.is_agent and principal.agent.pk == agent_id:
        return
    if principal.is_agent:
        raise Refused(f"An agent speaks only as itself, not as agent {name}.")
    raise Refused(f"Only agent {name} itself speaks as {name}; name a person with person:<name>.")


def owner_for_write(
    principal: Principal,
    name: str | None,
    *,
    field: str = "owner",
    refusal: str = "An agent may write only as itself.",
    missing: str = "Name the owner agent.",
) -> Agent:
    """The owner agent a write names (in `field`): an agent token writes only as itself (and is
    the default); anyone else names the owner."""
    if principal.is_agent:
        if name and name != principal.agent.name:
            raise Refused(refusal)
        return principal.agent
    if not name:
        raise Invalid({field: [missing]})
    owner = owner_selected(name)
    if owner is None:
        raise Invalid({field: [f"No agent named {name}."]})
    return owner


# --- references a write cites ---------------------------------------------------------------
# A writer cites sources (`{kind, ref}`), a superseded memory, a relation target. Every internal
# reference must be one the writer may read: otherwise a write would copy another agent's private
# object into the writer's provenance (its fingerprint, its changed fields). Unknown and invisible
# references get the same answer. External kinds (ticket, kb, record) are the owning system's and
# are pushed to us, so anyone may cite them.


def conversation_readable_q(principal: Principal, prefix: str = "") -> Q:
    """Conversations `principal` may read: an agent its own (none it holds in another agent's
    direct message), people with a role every one, integrations none."""
    if principal.is_agent:
        return _own_conversations_q(principal.agent, prefix)
    return Q() if principal.is_reviewer else Q(pk__in=[])


def task_outcome_readable_q(principal: Principal) -> Q:
    """Task outcomes `principal` may read: an agent its own, people with a role every one."""
    if principal.is_agent:
        return Q(agent=principal.agent)
    return Q() if principal.is_reviewer else Q(pk__in=[])


# One entry per internal source kind: its model and the filter of the rows `principal` may read.
SOURCE_READERS = {
    "memory": (Memory, readable_q),
    "entry": (Entry, readable_q),
    "message": (Message, message_readable_q),
    "conversation": (Conversation, conversation_readable_q),
    "task_outcome": (TaskOutcome, task_outcome_readable_q),
    "material": (Material, readable_q),
}


def readable_sources(principal: Principal, sources) -> set[tuple[str, str]]:
    """The (kind, ref) pairs among `sources` ({kind, ref} dicts or pairs) that `principal` may
    read: every external one, and the internal ones that exist where it reads. People with a role
    and background jobs read everything, so every pair (one not found is recorded untracked, as
    it always was)."""
    pairs = {(s["kind"], str(s["ref"])) if isinstance(s, dict) else (s[0], str(s[1])) for s in sources}
    if principal.is_reviewer:
        return pairs
    out = {p for p in pairs if p[0] in EXTERNAL_KINDS}
    for kind, (model, readable) in SOURCE_READERS.items():
        refs = {ref for k, ref in pairs if k == kind}
        if refs:
            out |= {(kind, ref) for ref in refs_among(model, refs, lambda q=readable: q(principal))}
    return out


def check_sources(principal: Principal, sources, *, field: str = "sources") -> None:
    """Raise Invalid (naming them) unless `principal` may read every source it cites. The one
    check every route that records sources calls before it writes anything."""
    sources = list(sources or ())
    if not sources:
        return
    readable = readable_sources(principal, sources)
    unreadable = []
    for s in sources:
        pair = (s["kind"], str(s["ref"]))
        if pair not in readable and f"{pair[0]}:{pair[1]}" not in unreadable:
            unreadable.append(f"{pair[0]}:{pair[1]}")
    if unreadable:
        raise Invalid({field: [f"No source you can read is {', '.join(unreadable)}."]})


# --- one object, if the principal may see it -------------------------------------------------
# Every `*_get_for(principal, …)` lives here and raises the domain's NotFound / Refused, which the
# API's exception handler and the console's (knowledge.web) turn into 404 / 403 alike.


def memory_get_for(principal: Principal, memory_id: int, *, hidden: bool = False) -> Memory:
    """The memory with this id if `principal` may read it: 404 when there is none, 403 when it
    lies in a store the principal may not read — or, with `hidden`, 404 then too, for a read
    that must not tell an unreadable memory from a missing one (its provenance). The one access
    helper for a single memory."""
    memory = Memory.objects.select_related("owner").filter(pk=memory_id).first()
    if memory is None or (memory.status == Memory.QUEUED and is_agent_other_than(principal, memory.owner_id)):
        # another agent's unreviewed memory is not there at all for this agent
        raise NotFound(f"There is no memory {memory_id}.")
    if not can_read_store(principal, owner=memory.owner, store=memory.store):
        if hidden:
            raise NotFound("No such memory.")
        raise Refused("This memory lies in a store you may not read.")
    return memory


def entry_get_for(principal: Principal, entry_id, *, include_deleted: bool = False) -> Entry:
    """The entry if `principal` may read it; 404 otherwise (an unreadable entry is not
    distinguishable from a missing one)."""
    manager = Entry.all_objects if include_deleted else Entry.objects
    try:
        entry_id = int(entry_id)
    except (TypeError, ValueError):
        raise NotFound("No such entry.") from None
    entry = manager.filter(readable_q(principal), pk=entry_id).select_related("owner").first()
    if entry is None:
        raise NotFound("No such entry.")
    return entry


def material_get_for(principal: Principal, material_id) -> Material:
    """One material `principal` may see; a NotFound otherwise (unknown and invisible look alike)."""
    try:
        material_id = int(material_id)
    except (TypeError, ValueError):
        raise NotFound("No such material.") from None
    material = (
        Material.objects.filter(readable_q(principal), pk=material_id)
        .select_related("owner", "version")
        .first()
    )
    if material is None:
        raise NotFound(f"There is no material {material_id} you can see.")
    return material


def guide_get_for(principal: Principal, owner: Agent) -> CurationGuide:
    """Readable by people with a role and by the owner agent itself (it is in its self store)."""
    if not can_read_store(principal, owner=owner, store=CurationGuide.STORE):
        raise NotFound("No such curation guide.")
    return CurationGuide.for_owner(owner)


def check_own_conversation(principal: Principal, conversation: Conversation) -> None:
    """Raise Refused when an agent asks about a conversation of another agent (people with a role
    and background jobs may see any)."""
    if is_agent_other_than(principal, conversation.agent_id):
        raise another_agents("That conversation")


def conversation_get_for(principal: Principal, pk: int) -> Conversation:
    """The conversation (404 if unknown); agents only their own (403), reviewers any."""
    conversation = Conversation.objects.select_related("agent", "channel").filter(pk=pk).first()
    if conversation is None:
        raise NotFound("No Conversation matches the given query.")
    check_own_conversation(principal, conversation)
    if not (principal.is_agent or principal.is_reviewer):
        raise Refused("This token may not read conversations.")
    return conversation


def agent_get_for(principal: Principal, name: str, *, refusal: str) -> Agent:
    """The agent named (404 if none); an agent token may name only itself (`refusal` says what
    it may not do otherwise)."""
    agent = agent_named(name)
    if is_agent_other_than(principal, agent.pk):
        raise Refused(refusal)
    return agent
