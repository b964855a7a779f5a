"""The store vocabulary: what the stores are called, the scope a new conversation gets, and an
API `scope` turned into a store. Names only; who may read or write a store is
`knowledge.access`, which re-exports these (callers read them as `access.SHARED`…).

A store is a string: `shared` (the whole workspace), `self` (the owner agent alone),
`private:<person>` (one agent's direct conversation with one person), `channel:<channel>` (one
channel only)."""

from knowledge.errors import Invalid
from knowledge.models import Channel

SHARED, SELF = "shared", "self"
SCOPE_ALIASES = {"agent": SELF, "self": SELF, "shared": SHARED, "workspace": SHARED}
OWNER_ONLY_PREFIXES = (SELF, "private:")


def private_store(person_name: str) -> str:
    return f"private:{person_name}"


def store_person(store: str) -> str:
    """The person a `private:<person>` store is about; "" for any other store."""
    return store[len("private:") :] if store.startswith("private:") else ""


def channel_store(channel_name: str) -> str:
    return f"channel:{channel_name}"


def conversation_scope(channel: Channel) -> tuple[list[str], str]:
    """(stores read, store written by default) for a new conversation in `channel`: a shared
    channel reads shared + self and writes shared; a channel-only channel reads its channel
    store + self and writes the channel store; a direct message with person P reads shared +
    self + private:P and writes private:P. Fixed on the Conversation when it starts."""
    if channel.kind == Channel.KIND_DM:
        private = private_store(channel.person.name)
        return [SHARED, SELF, private], private
    if channel.memory_scope == Channel.SCOPE_CHANNEL:
        own = channel_store(channel.name)
        return [own, SELF], own
    return [SHARED, SELF], SHARED


def parse_scope(value: str) -> str:
    """Turn an API `scope` (agent, shared, workspace, private:<person>, channel:<channel>) into a
    store string, or raise Invalid."""
    value = (value or "").strip()
    if value in SCOPE_ALIASES:
        return SCOPE_ALIASES[value]
    for prefix in ("private:", "channel:"):
        if value.startswith(prefix) and len(value) > len(prefix):
            return value
    raise Invalid({"scope": ["Use agent, shared, workspace, private:<person> or channel:<channel>."]})


def message_store(channel: Channel) -> str:
    """The store a message said in `channel` now belongs to: the channel's default write store."""
    return conversation_scope(channel)[1]


def channels_holding(channels, stores) -> list[int]:
    """The channels among `channels` whose messages can be in one of `stores`: a DM's messages
    are in its person's private store; a shared channel's in `shared` or its own channel store
    (whichever its routing rule was when they arrived)."""
    ids = []
    for pk, kind, name, person in channels:
        if kind == Channel.KIND_DM:
            if private_store(person) in stores:
                ids.append(pk)
        elif SHARED in stores or channel_store(name) in stores:
            ids.append(pk)
    return ids
