"""Every id a reader is shown passes the one access check: the conflict note and `conflict_with`,
`related`, `supersedes` / `superseded_by`, sources, provenance and expansions, over REST and MCP,
for agents, integrations and reviewers looking through an agent's eyes.

The world: scribe (a trusted agent) keeps a `self` note with a secret policy name and a memory in
its direct message with bob (`private:bob`); its shared memories disagree with, cite and
supersede those. copilot (another agent) reads `shared`; ursula (an untrusted agent) has a queued
shared memory nobody has reviewed. Nothing of scribe's private text, nor the id of a memory
copilot may not read, reaches copilot or anyone searching through copilot's eyes."""

import datetime
import json

import pytest
from django.utils import timezone

from knowledge.models import Channel, Memory
from knowledge.principal import Principal
from memory.lifecycle.conflicts import contradictions_sweep
from memory.mcp import tools
from tests import factory

SECRET = "KIWI-44"


def _write(client, **body):
    response = client.post("/api/memory", {"sources": [{"kind": "kb", "ref": "KB-1"}], **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture
def leaky(world, django_capture_on_commit_callbacks):
    scribe = world.client("scribe")
    dm_bob = factory.make_channel("dm-bob", kind=Channel.KIND_DM, person=world.bob, agent=world.scribe)
    factory.make_conversation(world.scribe, dm_bob)
    with django_capture_on_commit_callbacks(execute=True):
        note = _write(
            scribe, scope="self", text=f"Refunds are not allowed on Fridays per secret policy {SECRET}"
        )
        bob = _write(scribe, scope="private:bob", text=f"Bob's refunds on Fridays follow policy {SECRET}")
        old = _write(scribe, scope="self", text=f"Refund approvals need two managers under {SECRET}")
    Memory.objects.filter(pk__in=[note["id"], bob["id"]]).update(
        valid_from=timezone.now() - datetime.timedelta(days=30)
    )
    with django_capture_on_commit_callbacks(execute=True):
        public = _write(scribe, scope="shared", text="Refunds are allowed on Fridays")
        cites = _write(
            scribe,
            scope="shared",
            text="Friday refunds are handled by the finance desk",
            sources=[{"kind": "memory", "ref": str(note["id"])}, {"kind": "kb", "ref": "KB-2"}],
        )
        newer = _write(scribe, scope="shared", text="Refund approvals need one manager", supersedes=old["id"])
    contradictions_sweep()
    ursula = factory.make_agent("ursula")
    queued = factory.make_queued_memory(ursula, f"Friday refunds are stopped by {SECRET}", store="shared")
    conv = factory.make_conversation(world.copilot, world.general)
    hidden = {note["id"], bob["id"], old["id"], queued.pk}
    return {"conv": conv, "hidden": hidden, "shown": [public["id"], cites["id"], newer["id"]]}


ID_FIELDS = {"id", "conflict_with", "supersedes", "superseded_by", "memory", "ref", "related", "entry"}


def _ids(value, key=None):
    """Every integer (or digit string) under an id-bearing key, anywhere in a JSON body."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _ids(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _ids(v, key)
    elif key in ID_FIELDS and (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
        yield int(value)


def _clean(body, hidden):
    body = {k: v for k, v in body.items() if k != "query"}  # the question asked, echoed
    text = json.dumps(body, ensure_ascii=False, default=str)
    assert SECRET not in text, text
    assert not set(_ids(body)) & hidden, (set(_ids(body)) & hidden, text)


def test_the_kiwi_case_the_conflict_note_names_nothing_the_reader_may_not_read(world, leaky):
    """The probe's case over REST: scribe's shared memory disagrees with scribe's `self` note,
    and copilot's search and context show neither the note's text, its id nor its date."""
    copilot = world.client("copilot")
    body = copilot.post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": leaky["conv"].pk, "q": "Are refunds allowed on Fridays?"},
        format="json",
    ).json()
    memories = [r for r in body["results"] if r["kind"] == "memory"]
    assert leaky["shown"][0] in [r["id"] for r in memories]  # the shared memory is found…
    assert all(r["conflict_with"] == [] for r in memories)  # …with no note of the hidden one
    _clean(body, leaky["hidden"])
    context = copilot.post(
        "/api/agents/copilot/context",
        {"conversation": leaky["conv"].pk, "q": "Are refunds allowed on Fridays?"},
        format="json",
    )
    assert context.status_code == 200, context.content
    _clean(context.json(), leaky["hidden"])
    # scribe itself reads its note: the disagreement is shown to it, with the id
    scribe_conv = factory.make_conversation(world.scribe, world.general)
    own = (
        world.client("scribe")
        .post(
            "/api/memory/search",
            {"agent": "scribe", "conversation": scribe_conv.pk, "q": "Are refunds allowed on Fridays?"},
            format="json",
        )
        .json()
    )
    notes = [r for r in own["results"] if r["kind"] == "memory" and r["conflict_with"]]
    assert notes and SECRET in notes[0]["text"]


@pytest.mark.django_db(transaction=True)
def test_the_kiwi_case_over_mcp(world, leaky):
    """`tools.call_tool`, what the MCP server runs for every tool call (stdio and HTTP alike)."""
    copilot = Principal.for_agent(world.copilot)
    q = {"conversation": leaky["conv"].pk, "q": "Are refunds allowed on Fridays?"}
    _clean(tools.call_tool(copilot, "memory_search", q), leaky["hidden"])
    _clean(tools.call_tool(copilot, "context_compile", q), leaky["hidden"])


@pytest.mark.parametrize("who", ["copilot", "reviewer"])
def test_search_and_context_through_copilots_eyes_show_no_hidden_id(world, leaky, who):
    """A reviewer's playground search as copilot sees what copilot sees."""
    client = world.client(who)
    for q in ("refunds Fridays", "refund approvals managers", "finance desk", SECRET):
        body = client.post(
            "/api/memory/search",
            {"agent": "copilot", "conversation": leaky["conv"].pk, "q": q, "k": 50},
            format="json",
        )
        assert body.status_code == 200, body.content
        _clean(body.json(), leaky["hidden"])


def test_a_readable_memory_names_only_the_ids_its_reader_may_read(world, leaky):
    copilot = world.client("copilot")
    public, cites, newer = leaky["shown"]
    for pk in leaky["shown"]:
        body = copilot.get(f"/api/memory/{pk}")
        assert body.status_code == 200, body.content
        _clean(body.json(), leaky["hidden"])
    assert copilot.get(f"/api/memory/{newer}").json()["supersedes"] is None
    assert copilot.get(f"/api/memory/{cites}").json()["sources"] == [{"kind": "kb", "ref": "KB-2"}]
    listed = copilot.get("/api/memory", {"page_size": 200})
    assert listed.status_code == 200
    _clean(listed.json(), leaky["hidden"])
    # the writer and a reviewer see the links
    for who in ("scribe", "reviewer"):
        body = world.client(who).get(f"/api/memory/{newer}").json()
        assert body["supersedes"] is not None and body["supersedes"] in leaky["hidden"]
        assert len(world.client(who).get(f"/api/memory/{cites}").json()["sources"]) == 2


def test_unreviewed_is_unseen_by_other_agents(world, leaky):
    """Another agent's queued shared memory: not listed, not opened (as if there were none), not
    in the queue filter; its writer and reviewers see it."""
    (queued,) = Memory.objects.filter(status=Memory.QUEUED, owner__name="ursula")
    copilot = world.client("copilot")
    assert copilot.get(f"/api/memory/{queued.pk}").status_code == 404
    for params in ({"status": "queued"}, {"page_size": 200}, {"q": SECRET}):
        body = copilot.get("/api/memory", params).json()
        assert queued.pk not in [m["id"] for m in body["results"]]
    ursula = world.client(None)
    ursula.credentials(HTTP_AUTHORIZATION=f"Bearer {factory.make_token(agent=queued.owner)}")
    assert ursula.get(f"/api/memory/{queued.pk}").status_code == 200
    assert queued.pk in [m["id"] for m in ursula.get("/api/memory", {"status": "queued"}).json()["results"]]
    assert world.client("reviewer").get(f"/api/memory/{queued.pk}").status_code == 200


def test_integrations_read_no_memory(world, leaky):
    client = world.client("integration")
    assert client.get("/api/memory").status_code == 403
    for pk in leaky["shown"]:
        assert client.get(f"/api/memory/{pk}").status_code == 403
