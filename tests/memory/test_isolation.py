"""Store isolation through the HTTP API: who may join a channel (open a conversation), who may
post to it, and what each agent reads there — for every kind of store (shared, channel-only,
private to a direct message, self) and every route that reads (search by conversation or by
channel, browse, context compilation, memory listing)."""

import pytest

from knowledge.models import Channel, Conversation, Message
from tests import factory

SECRETS = {
    "general": "zebrafinch rollout planned in the shared channel",
    "support": "zebrafinch escalation only the support channel sees",
    "dm-alice": "zebrafinch is my childhood nickname, keep it private",
}
Q = "zebrafinch"


def _join(client, agent, channel):
    return client.post("/api/conversations", {"agent": agent, "channel": channel}, format="json")


def _post(client, channel, text="hello", speaker="alice"):
    return client.post("/api/messages", {"channel": channel, "speaker": speaker, "text": text}, format="json")


def _texts(response):
    assert response.status_code == 200, response.content
    body = response.json()
    found = set()
    for result in body.get("results", []):
        found.add(result.get("text", ""))
        for message in result.get("messages", []):
            found.add(message.get("text", ""))
    for section in body.get("sections", []):
        for item in section.get("items", []):
            found.add(item.get("text", ""))
        found.add(section.get("text", ""))
    return " ".join(found)


@pytest.fixture
def evidence(world):
    """copilot takes part in general, support and its DM with alice; scribe in general and
    support. One secret message in each channel, one memory in each store."""
    conversations = {
        ("copilot", name): factory.make_conversation(world.copilot, channel)
        for name, channel in (
            ("general", world.general),
            ("support", world.support),
            ("dm-alice", world.dm_alice),
        )
    }
    conversations[("scribe", "general")] = factory.make_conversation(world.scribe, world.general)
    conversations[("scribe", "support")] = factory.make_conversation(world.scribe, world.support)
    for channel in (world.general, world.support, world.dm_alice):
        factory.post_messages(channel, [{"speaker": "alice", "text": SECRETS[channel.name]}])
    memories = {
        store: factory.make_memory_row(world.copilot, f"zebrafinch memory in {store}", store=store)
        for store in ("shared", "channel:support", "private:alice", "self")
    }
    factory.embed_all()
    return conversations, memories


# --- join --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token,agent,channel,status",
    [
        ("copilot", "copilot", "general", 201),
        ("copilot", "copilot", "support", 201),
        ("copilot", "copilot", "dm-alice", 201),  # its own DM
        ("scribe", "scribe", "general", 201),
        ("scribe", "scribe", "support", 201),
        ("scribe", "scribe", "dm-alice", 403),  # another agent's DM
        ("scribe", "copilot", "general", 403),  # only for itself
        ("scribe", "copilot", "dm-alice", 403),
        ("admin", "copilot", "dm-alice", 201),  # on the DM's agent's behalf
        ("admin", "scribe", "dm-alice", 403),  # not even an admin lets another agent in
        ("admin", "scribe", "general", 201),
        ("reviewer", "copilot", "general", 403),
        ("integration", "copilot", "general", 403),
    ],
)
def test_who_may_open_a_conversation(world, token, agent, channel, status):
    response = _join(world.client(token), agent, channel)
    assert response.status_code == status, response.content
    opened = Conversation.objects.filter(agent__name=agent, channel__name=channel).exists()
    assert opened == (status == 201)


def test_a_dm_names_its_agent_and_person(world):
    admin = world.client("admin")
    missing = admin.post("/api/channels", {"name": "dm-zed", "kind": "dm", "person": "zed"}, format="json")
    assert missing.status_code == 400 and "agent" in missing.json()["fields"]
    unknown = admin.post(
        "/api/channels", {"name": "dm-zed", "kind": "dm", "person": "zed", "agent": "nobody"}, format="json"
    )
    assert unknown.status_code == 400 and "agent" in unknown.json()["fields"]
    shared = admin.post("/api/channels", {"name": "ops", "agent": "scribe"}, format="json")
    assert shared.status_code == 400 and "agent" in shared.json()["fields"]
    assert not Channel.objects.filter(name__in=["dm-zed", "ops"]).exists()
    made = admin.post(
        "/api/channels", {"name": "dm-zed", "kind": "dm", "person": "zed", "agent": "scribe"}, format="json"
    )
    assert made.status_code == 201, made.content
    assert (made.json()["agent"], made.json()["person"]) == ("scribe", "zed")
    assert _join(world.client("scribe"), "scribe", "dm-zed").status_code == 201
    assert _join(world.client("copilot"), "copilot", "dm-zed").status_code == 403


# --- post --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token,channel,status",
    [
        ("copilot", "dm-alice", 201),  # its own DM, even before a conversation there
        ("scribe", "dm-alice", 403),
        ("integration", "dm-alice", 403),  # takes no part in it
        ("admin", "dm-alice", 201),
        ("reviewer", "dm-alice", 403),
        ("copilot", "general", 403),  # takes no part in general yet
        ("scribe", "support", 403),
    ],
)
def test_who_may_post_before_joining(world, token, channel, status):
    response = _post(world.client(token), channel, text="posted before any conversation")
    assert response.status_code == status, response.content
    assert Message.objects.filter(channel__name=channel).exists() == (status == 201)


def test_posting_follows_taking_part(world):
    factory.make_conversation(world.scribe, world.general)
    assert _post(world.client("scribe"), "general").status_code == 201
    assert _post(world.client("integration"), "general").status_code == 403
    from knowledge.conversations.services import channel_integration_add
    from knowledge.models import Integration

    channel_integration_add(
        actor=factory.SYSTEM, channel=world.dm_alice, integration=Integration.objects.get(name="tickets")
    )
    assert _post(world.client("integration"), "dm-alice").status_code == 201
    # a batch with one forbidden channel stores nothing
    batch = world.client("scribe").post(
        "/api/messages",
        {
            "messages": [
                {"channel": "general", "speaker": "alice", "text": "fine"},
                {"channel": "dm-alice", "speaker": "alice", "text": "in alice's name"},
            ]
        },
        format="json",
    )
    assert batch.status_code == 403
    assert not Message.objects.filter(text__in=["fine", "in alice's name"]).exists()


# --- read --------------------------------------------------------------------------------------

# What each agent may read in each channel it takes part in: (agent, channel) → channels whose
# secret it sees. copilot's DM also reads shared messages; scribe never sees the DM.
READS = {
    ("copilot", "general"): {"general"},
    ("copilot", "support"): {"support"},
    ("copilot", "dm-alice"): {"dm-alice", "general"},
    ("scribe", "general"): {"general"},
    ("scribe", "support"): {"support"},
}


@pytest.mark.parametrize("agent,channel", sorted(READS))
@pytest.mark.parametrize("by", ["conversation", "channel"])
def test_search_reads_exactly_the_stores_of_the_conversation(world, evidence, agent, channel, by):
    conversations, _ = evidence
    where = (
        {"conversation": conversations[(agent, channel)].pk} if by == "conversation" else {"channel": channel}
    )
    text = _texts(
        world.client(agent).post(
            "/api/memory/search", {"agent": agent, "q": Q, "k": 50, **where}, format="json"
        )
    )
    for name, secret in SECRETS.items():
        assert (secret in text) == (name in READS[(agent, channel)]), (name, text)
    # memories: shared is read in shared channels, the private store only in the DM by its
    # owner, the channel store only in that channel, self only by its owner.
    assert ("memory in private:alice" in text) == ((agent, channel) == ("copilot", "dm-alice"))
    assert ("memory in shared" in text) == (channel != "support")
    assert ("memory in self" in text) == (agent == "copilot")
    assert ("memory in channel:support" in text) == (channel == "support")


def test_context_and_browse_never_open_another_agents_dm(world, evidence):
    conversations, memories = evidence
    dm_message = Message.objects.get(channel=world.dm_alice)
    scribe = world.client("scribe")
    for conversation in (conversations[("scribe", "general")], conversations[("scribe", "support")]):
        context = scribe.post(
            "/api/agents/scribe/context",
            {"conversation": conversation.pk, "q": Q, "budget_tokens": 4000},
            format="json",
        )
        assert SECRETS["dm-alice"] not in _texts(context)
    assert scribe.get(f"/api/memory/browse/message/{dm_message.pk}?agent=scribe").status_code in (403, 404)
    assert scribe.get(f"/api/memory/{memories['private:alice'].pk}").status_code in (403, 404)
    assert (
        scribe.post(
            "/api/memory/search", {"agent": "scribe", "channel": "dm-alice", "q": Q}, format="json"
        ).status_code
        == 403
    )
    copilot = world.client("copilot")
    assert copilot.get(f"/api/memory/browse/message/{dm_message.pk}?agent=copilot").status_code == 200


def test_a_conversation_left_in_another_agents_dm_opens_nothing(world, evidence):
    """A row made before direct messages named their agent gives no part in the DM: no read, no
    post, no write into its private store."""
    conversations, memories = evidence
    legacy = Conversation.objects.create(
        agent=world.scribe,
        channel=world.dm_alice,
        read_stores=["shared", "self", "private:alice"],
        write_store="private:alice",
    )
    scribe = world.client("scribe")
    found = _texts(
        scribe.post(
            "/api/memory/search",
            {"agent": "scribe", "conversation": legacy.pk, "q": Q, "k": 50},
            format="json",
        )
    )
    assert SECRETS["dm-alice"] not in found and "memory in private:alice" not in found
    other = _texts(
        scribe.post(
            "/api/memory/search",
            {"agent": "scribe", "conversation": conversations[("scribe", "general")].pk, "q": Q, "k": 50},
            format="json",
        )
    )
    assert SECRETS["dm-alice"] not in other
    assert _post(scribe, "dm-alice").status_code == 403
    write = scribe.post(
        "/api/memory", {"text": "alice said something", "scope": "private:alice"}, format="json"
    )
    assert write.status_code == 403


def test_a_search_previewed_in_a_dm_follows_who_takes_part_not_conversation_rows(world):
    """`access.takes_part` decides, DM rule included: a conversation row left in another agent's
    DM does not let that agent search there (the old check in recall's scope only asked whether a
    row existed, and said 200), while the DM's own agent may before it opens a conversation, as
    it may post there."""
    Conversation.objects.create(
        agent=world.scribe,
        channel=world.dm_alice,
        read_stores=["shared", "self", "private:alice"],
        write_store="private:alice",
    )
    search = {"channel": "dm-alice", "q": Q}
    refused = world.client("scribe").post("/api/memory/search", {**search, "agent": "scribe"}, format="json")
    assert refused.status_code == 403
    assert "scribe takes no part in dm-alice" in refused.json()["error"]
    own = world.client("copilot").post("/api/memory/search", {**search, "agent": "copilot"}, format="json")
    assert own.status_code == 200, own.content
    assert own.json()["scope"]["read_stores"] == ["shared", "self", "private:alice"]
    # A reviewer still looks through any agent's eyes.
    reviewer = world.client("reviewer").post(
        "/api/memory/search", {**search, "agent": "scribe"}, format="json"
    )
    assert reviewer.status_code == 200
