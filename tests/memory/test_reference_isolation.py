"""Every reference a writer gives is checked by the one access layer (`knowledge.access.
check_sources`) before anything is stored, and provenance shows a source's fingerprint and
changes only to whoever may read that source.

The matrix: principal (the owner agent, another agent, an integration, a reviewer, an admin) ×
source kind (memory, message, material, entry, task outcome, conversation; an external ticket)
× route (REST memory write, MCP memory_write, REST entry block, REST relation, REST lesson,
the console's block form). copilot owns every private object cited; scribe is the other agent.
"""

import pytest

from knowledge.entries import services as entries
from knowledge.errors import DomainError
from knowledge.materials import services as materials
from knowledge.models import Entry, EntryRelation, Memory, MemorySource
from knowledge.principal import Principal
from memory.mcp import tools
from memory.provenance.services import provenance_check
from memory.skills import outcomes
from memory.skills import services as skills
from tests import factory

ADMIN = Principal(kind="person", name="tests", role="admin")
INTERNAL = ("memory", "message", "material", "entry", "task_outcome", "conversation")


@pytest.fixture
def private(world):
    """One private object of copilot's of every internal kind: a self memory, a message in its
    DM with alice, a material and an entry in its self store, a task outcome and the DM's
    conversation."""
    conversation = factory.make_conversation(world.copilot, world.dm_alice)
    (message,) = factory.post_messages(world.dm_alice, [{"speaker": "alice", "text": "my PIN is ZEBRA-9904"}])
    material = materials.material_paste(
        actor=ADMIN, owner=world.copilot, store="self", title="pat", text="The pat code is ZEBRA-9904."
    )
    entry = factory.make_entry(world.copilot, store="self", name="pat", blocks=["pat code ZEBRA-9904"])
    skill = skills.skill_create(actor=ADMIN, name="triage", title="Triage", instructions="Ask first.")
    skills.skill_enable(actor=ADMIN, agent=world.copilot, skill=skill, enabled=True)
    skills.skill_enable(actor=ADMIN, agent=world.scribe, skill=skill, enabled=True)
    outcome, _ = outcomes.outcome_record(
        actor=ADMIN, agent=world.copilot, skill=skill, task="reset the PIN", result="success"
    )
    memory = factory.make_memory(world.copilot, "copilot's own note", store="self")
    return {
        "memory": str(memory.pk),
        "message": str(message),
        "material": str(material.pk),
        "entry": str(entry.pk),
        "task_outcome": str(outcome.pk),
        "conversation": str(conversation.pk),
        "skill": skill,
    }


def _rest_memory(world, who, source, owner):
    body = {"scope": "shared", "text": f"cites {source['kind']}", "sources": [source]}
    if who in ("reviewer", "admin", "integration"):
        body["agent"] = owner
    return world.client(who).post("/api/memory", body, format="json")


# --- REST and MCP memory writes ------------------------------------------------------------


@pytest.mark.parametrize("kind", INTERNAL)
@pytest.mark.parametrize(
    "who,owner,status",
    [
        ("copilot", "copilot", 201),  # its own object
        ("scribe", "scribe", 400),  # another agent's private object
        ("integration", "scribe", 403),  # an integration writes no memory at all
        ("reviewer", "scribe", 201),  # people with a role read everything
        ("admin", "scribe", 201),
    ],
)
def test_a_memory_write_cites_only_sources_its_writer_may_read(world, private, kind, who, owner, status):
    before = Memory.objects.count()
    response = _rest_memory(world, who, {"kind": kind, "ref": private[kind]}, owner)
    assert response.status_code == status, response.content
    if status == 400:
        assert response.json()["fields"]["sources"] == [f"No source you can read is {kind}:{private[kind]}."]
    assert Memory.objects.count() == before + (1 if status == 201 else 0)


@pytest.mark.parametrize("who", ["copilot", "scribe"])
def test_unknown_internal_sources_look_like_invisible_ones_and_external_ones_pass(world, who):
    for kind in INTERNAL:
        response = _rest_memory(world, who, {"kind": kind, "ref": "987654"}, who)
        assert response.status_code == 400, (kind, response.content)
        assert response.json()["fields"]["sources"] == [f"No source you can read is {kind}:987654."]
    assert _rest_memory(world, who, {"kind": "ticket", "ref": "INC-1"}, who).status_code == 201


def test_people_with_a_role_cite_what_is_not_found_as_untracked(world):
    """They read everything, so nothing is revealed: an internal source not found is recorded
    untracked, as before."""
    response = _rest_memory(world, "admin", {"kind": "message", "ref": "987654"}, "scribe")
    assert response.status_code == 201, response.content
    assert MemorySource.objects.get(memory_id=response.json()["id"]).state == MemorySource.UNTRACKED


def _mcp(principal, name, args):
    """The MCP tool as the server runs it: the tool's function, refusals as the API's errors."""
    try:
        return 200, tools.TOOLS_BY_NAME[name].run(principal, args)
    except Exception as exc:
        refusal = tools.refusal_of(exc)
        if refusal is None:
            raise
        return refusal.status, refusal.body


@pytest.mark.parametrize("kind", INTERNAL)
def test_mcp_memory_write_checks_every_source_kind(world, private, kind):
    source = {"kind": kind, "ref": private[kind]}
    args = {"scope": "shared", "text": f"cites {kind}", "sources": [source]}
    before = Memory.objects.count()
    status, body = _mcp(Principal.for_agent(world.scribe), "memory_write", args)
    assert status == 400 and "sources" in body["fields"], body
    assert Memory.objects.count() == before
    status, body = _mcp(Principal.for_agent(world.copilot), "memory_write", args)
    assert status == 200, body
    assert body["sources"] == [source]


def test_supersedes_names_only_a_memory_the_writer_may_read(world, private):
    body = {"scope": "shared", "text": "replaces copilot's note", "supersedes": int(private["memory"])}
    response = world.client("scribe").post("/api/memory", body, format="json")
    assert response.status_code == 400 and "supersedes" in response.json()["fields"]
    status, out = _mcp(Principal.for_agent(world.scribe), "memory_write", body)
    assert status == 400 and "supersedes" in out["fields"]


# --- entries: blocks and relations ------------------------------------------------------------


@pytest.fixture
def scribe_entry(world):
    return factory.make_entry(world.scribe, store="shared", name="scribe's page")


@pytest.mark.parametrize("kind", INTERNAL)
def test_an_entry_block_cites_only_readable_sources(world, private, scribe_entry, kind):
    source = {"kind": kind, "ref": private[kind]}
    url = f"/api/entries/{scribe_entry.pk}/blocks"
    before = Memory.objects.filter(entry=scribe_entry).count()
    refused = world.client("scribe").post(url, {"text": "copied", "sources": [source]}, format="json")
    assert refused.status_code == 400, refused.content
    assert Memory.objects.filter(entry=scribe_entry).count() == before
    created = world.client("admin").post(
        url, {"text": "cited by an admin", "sources": [source]}, format="json"
    )
    assert created.status_code == 201, created.content


def test_an_entry_created_with_blocks_checks_their_sources(world, private):
    body = {
        "scope": "shared",
        "name": "copied page",
        "blocks": [{"text": "copied", "sources": [{"kind": "entry", "ref": private["entry"]}]}],
    }
    response = world.client("scribe").post("/api/entries", body, format="json")
    assert response.status_code == 400 and "blocks" in response.json()["fields"], response.content
    assert not Entry.objects.filter(name="copied page").exists()


def test_a_block_correction_checks_its_new_sources(world, private, scribe_entry):
    block = entries.block_add(actor=ADMIN, entry_id=scribe_entry.pk, text="a fact")
    body = {
        "text": "a corrected fact",
        "reason": "fix",
        "sources": [{"kind": "message", "ref": private["message"]}],
    }
    response = world.client("scribe").patch(
        f"/api/entries/{scribe_entry.pk}/blocks/{block.pk}", body, format="json"
    )
    assert response.status_code == 400, response.content
    assert Memory.objects.get(pk=block.pk).text == "a fact"


@pytest.mark.parametrize("kind", INTERNAL)
def test_a_relation_cites_only_readable_evidence(world, private, scribe_entry, kind):
    target = factory.make_entry(world.scribe, store="shared", name="other page")
    body = {"predicate": "mentions", "target": target.pk, "sources": [{"kind": kind, "ref": private[kind]}]}
    response = world.client("scribe").post(f"/api/entries/{scribe_entry.pk}/relations", body, format="json")
    assert response.status_code == 400, response.content
    assert not EntryRelation.objects.filter(source=scribe_entry).exists()


def test_a_relation_target_must_be_readable(world, private, scribe_entry):
    body = {
        "predicate": "mentions",
        "target": int(private["entry"]),
        "sources": [{"kind": "kb", "ref": "KB-1"}],
    }
    response = world.client("scribe").post(f"/api/entries/{scribe_entry.pk}/relations", body, format="json")
    assert response.status_code == 400 and "target" in response.json()["fields"]


def test_the_console_block_form_of_a_reviewer_cites_anything_and_shows_its_provenance(world, private):
    """The console is for people with a role, who read every source: the form stores the block
    and the memory page shows the source's fingerprint."""
    entry = factory.make_entry(world.copilot, store="self", name="copilot's page")
    client = world.client(None)
    client.force_login(world.reviewer)
    response = client.post(
        f"/knowledge/entries/{entry.pk}/blocks",
        {"text": "a fact", "sources": f"message:{private['message']}"},
    )
    assert response.status_code == 302
    block = Memory.objects.get(entry=entry, text="a fact")
    source = MemorySource.objects.get(memory=block)
    assert source.fingerprint and source.fingerprint in client.get(f"/memories/{block.pk}/").content.decode()


# --- lessons (REST and MCP) -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "material", "entry"])
def test_a_lesson_cites_beside_its_evidence_only_readable_sources(world, private, kind):
    own_outcome, _ = outcomes.outcome_record(
        actor=ADMIN, agent=world.scribe, skill=private["skill"], task="sort tickets", result="success"
    )
    sources = [{"kind": "task_outcome", "ref": str(own_outcome.pk)}, {"kind": kind, "ref": private[kind]}]
    body = {"lesson": f"Always check the {kind} first.", "sources": sources}
    response = world.client("scribe").post("/api/agents/scribe/skills/triage/experience", body, format="json")
    assert response.status_code == 400 and "sources" in response.json()["fields"], response.content
    status, out = _mcp(Principal.for_agent(world.scribe), "experience_add", {"skill": "triage", **body})
    assert status == 400 and "sources" in out["fields"], out
    assert not Memory.objects.filter(skill__isnull=False, owner=world.scribe).exists()


def test_a_lesson_revises_only_a_lesson_of_the_writers_own_overlay(world, private):
    lesson = skills.lesson_add(
        actor=ADMIN,
        agent=world.copilot,
        skill=private["skill"],
        text="Ask for the ticket number first.",
        sources=[{"kind": "task_outcome", "ref": private["task_outcome"]}],
    )
    own_outcome, _ = outcomes.outcome_record(
        actor=ADMIN, agent=world.scribe, skill=private["skill"], task="sort tickets", result="success"
    )
    body = {
        "lesson": "Never ask for the ticket number.",
        "sources": [{"kind": "task_outcome", "ref": str(own_outcome.pk)}],
        "revises": lesson.pk,
    }
    response = world.client("scribe").post("/api/agents/scribe/skills/triage/experience", body, format="json")
    assert response.status_code == 400 and "revises" in response.json()["fields"], response.content
    other = world.client("scribe").post("/api/agents/copilot/skills/triage/experience", body, format="json")
    assert other.status_code == 403
    assert Memory.objects.get(pk=lesson.pk).status == Memory.ACTIVE


# --- the read side: provenance detail ------------------------------------------------------------


def _cited_by_scribe(world, kind, ref):
    """A shared memory of scribe's citing copilot's private object, as a write before this check
    could store it (the row writer takes any source)."""
    return factory.make_memory_row(
        world.scribe, f"scribe cites {kind}", store="shared", sources=[{"kind": kind, "ref": ref}]
    )


@pytest.mark.parametrize("kind", ["message", "material", "entry"])
def test_provenance_hides_the_fingerprint_of_a_source_the_viewer_may_not_read(world, private, kind):
    memory = _cited_by_scribe(world, kind, private[kind])
    assert MemorySource.objects.get(memory=memory).fingerprint  # recorded, and worth hiding
    url = f"/api/memory-provenance/{memory.pk}"
    (hidden,) = world.client("scribe").get(url).json()["sources"]
    assert (hidden["fingerprint"], hidden["readable"], hidden["changes"]) == ("", False, [])
    for who in ("copilot", "reviewer", "admin"):  # the source's owner and people with a role
        (shown,) = world.client(who).get(url).json()["sources"]
        assert (
            shown["readable"] and shown["fingerprint"] == MemorySource.objects.get(memory=memory).fingerprint
        )


def test_provenance_changes_of_a_private_entry_are_shown_only_to_its_readers(world, private):
    memory = _cited_by_scribe(world, "entry", private["entry"])
    block = Memory.objects.get(entry_id=int(private["entry"]))
    entries.block_correct(
        actor=ADMIN,
        entry_id=int(private["entry"]),
        block_id=block.pk,
        text="pat code ZEBRA-5150",
        reason="new code",
    )
    provenance_check(actor=factory.SYSTEM)
    url = f"/api/memory-provenance/{memory.pk}"
    (hidden,) = world.client("scribe").get(url).json()["sources"]
    assert hidden["state"] == "changed" and hidden["changes"] == []
    assert "ZEBRA" not in world.client("scribe").get(url).content.decode()
    (shown,) = world.client("copilot").get(url).json()["sources"]
    assert [c["field"] for c in shown["changes"]] == ["text"]
    assert "ZEBRA-5150" in shown["changes"][0]["after"] and "ZEBRA-9904" in shown["changes"][0]["before"]
    client = world.client(None)
    client.force_login(world.reviewer)
    assert b"ZEBRA-5150" in client.get(f"/memories/{memory.pk}/").content


# --- browse ids --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "message", "entry", "conversation"])
def test_browse_opens_only_ids_the_agent_may_read(world, private, kind):
    response = world.client("scribe").get(f"/api/memory/browse/{kind}/{private[kind]}")
    assert response.status_code == 403, response.content
    status, _ = _mcp(
        Principal.for_agent(world.scribe), "memory_browse", {"kind": kind, "id": int(private[kind])}
    )
    assert status == 403
    assert world.client("copilot").get(f"/api/memory/browse/{kind}/{private[kind]}").status_code == 200


def test_the_check_is_the_access_layers_and_says_no_before_writing(world, private):
    from knowledge import access

    scribe = Principal.for_agent(world.scribe)
    sources = [{"kind": k, "ref": private[k]} for k in INTERNAL] + [{"kind": "kb", "ref": "KB-1"}]
    assert access.readable_sources(scribe, sources) == {("kb", "KB-1")}
    assert access.readable_sources(Principal.for_agent(world.copilot), sources) == {
        (s["kind"], s["ref"]) for s in sources
    }
    with pytest.raises(DomainError):
        access.check_sources(scribe, sources)


@pytest.mark.django_db(transaction=True)
def test_the_mcp_servers_own_entry_point_refuses_a_foreign_source_and_a_foreign_voice(world):
    """`tools.call_tool`, what the MCP server runs for every tool call (stdio and HTTP alike)."""
    factory.make_conversation(world.copilot, world.dm_alice)
    (message,) = factory.post_messages(world.dm_alice, [{"speaker": "alice", "text": "my PIN is ZEBRA-9904"}])
    factory.make_conversation(world.scribe, world.general)
    scribe = Principal.for_agent(world.scribe)
    cite = {"scope": "shared", "text": "copied", "sources": [{"kind": "message", "ref": str(message)}]}
    with pytest.raises(tools.ToolRefused) as refused:
        tools.call_tool(scribe, "memory_write", cite)
    assert refused.value.status == 400 and "sources" in refused.value.body["fields"]
    speak = {"messages": [{"channel": "general", "speaker": "copilot", "text": "forged"}]}
    with pytest.raises(tools.ToolRefused) as refused:
        tools.call_tool(scribe, "messages_post", speak)
    assert refused.value.status == 403
    assert not Memory.objects.filter(text="copied").exists()
    assert (
        tools.call_tool(Principal.for_agent(world.copilot), "memory_write", cite)["sources"]
        == cite["sources"]
    )
