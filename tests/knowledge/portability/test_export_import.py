"""An agent's knowledge out as one JSON Lines file and back in: the round trip reads the same
(but for who wrote it: the importer), a second import writes nothing, a bad file is refused line
by line with nothing written."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from knowledge.entries.guides import guide_update
from knowledge.entries.services import relation_add
from knowledge.errors import Invalid
from knowledge.models import (
    Agent,
    AgentSkill,
    AuditEvent,
    CurationGuide,
    Entry,
    EntryRelation,
    Memory,
    MemorySource,
    MemoryVersion,
    PinnedMemo,
    Skill,
)
from knowledge.portability.services import agent_export, agent_import
from knowledge.principal import Principal
from memory.lifecycle.operate import memory_revise
from memory.recall.memo import memo_update
from memory.skills import services as skills
from tests import factory


def _knowledge(world):
    """The copilot's knowledge of every kind the file carries."""
    admin = Principal.for_user(world.admin)
    agent = world.copilot
    guide_update(actor=admin, owner=agent, taxonomy="person, system", update_rules="Date every fact.")
    memo_update(actor=admin, agent=agent, text="Answer in English.")
    vpn = factory.make_entry(
        agent, name="VPN", blocks=["Client 5.2.1 fixes sleep drops."], aliases=["remote access"]
    )
    it = factory.make_entry(
        agent,
        name="IT desk",
        blocks=[
            "Open 8-18.",
            {
                "text": "Floor 3.",
                "sources": [{"kind": "ticket", "ref": "INC-9", "state": {"status": "open"}}],
            },
        ],
    )
    relation_add(
        actor=admin,
        entry_id=vpn.pk,
        predicate="supported by",
        target_id=it.pk,
        sources=[{"kind": "ticket", "ref": "INC-9"}],
    )
    fact = factory.make_memory(
        agent, "Bob owns billing.", store="shared", key="billing.owner", value="bob",
        sources=[{"kind": "ticket", "ref": "INC-1", "state": {"status": "closed"}}],
    )  # fmt: skip
    memory_revise(actor=admin, memory_id=fact.pk, text="Bob Okafor owns billing.", reason="full name")
    factory.make_queued_memory(agent, "Alice prefers e-mail.")
    skill = skills.skill_create(actor=admin, name="triage", title="Triage", instructions="Sort tickets.")
    skills.skill_enable(actor=admin, agent=agent, skill=skill, enabled=True)
    conversation = factory.make_conversation(agent, world.general)
    skills.lesson_add(
        actor=admin,
        agent=agent,
        skill=skill,
        text="Ask for the ticket id first.",
        sources=[{"kind": "conversation", "ref": str(conversation.pk)}],
    )


def _export(agent) -> str:
    return "".join(agent_export(actor=factory.SYSTEM, agent=agent))


def _wipe(name):
    """Remove everything the agent knows, as an empty database would be (the agent row stays: the
    world's channels and conversations refer to it)."""
    agent = Agent.objects.get(name=name)
    EntryRelation.objects.filter(source__owner=agent).delete()
    Memory.objects.filter(owner=agent).delete()
    Entry.all_objects.filter(owner=agent).delete()
    skill_ids = list(AgentSkill.objects.filter(agent=agent).values_list("skill_id", flat=True))
    CurationGuide.objects.filter(owner=agent).delete()
    PinnedMemo.objects.filter(agent=agent).delete()
    AgentSkill.objects.filter(agent=agent).delete()
    Skill.objects.filter(pk__in=skill_ids).delete()


def _unauthored(text: str) -> list[dict]:
    """The file's lines without who wrote what: an import is authored by the importer, and each
    version's reason records the author the file named."""
    lines = []
    for line in text.splitlines():
        row = json.loads(line)
        row.pop("author_kind", None), row.pop("author_name", None)
        for v in row.get("versions") or []:
            v.pop("author_kind"), v.pop("author_name"), v.pop("reason")
        lines.append(row)
    return lines


def _counts():
    return [
        m.objects.count()
        for m in (Agent, Entry, EntryRelation, Memory, MemoryVersion, MemorySource, Skill, AgentSkill)
    ]


def test_export_import_into_an_empty_database_and_export_again_reads_the_same(world):
    _knowledge(world)
    Agent.objects.filter(name="copilot").update(trusted=True)  # its memories stay in force
    first = _export(Agent.objects.get(name="copilot"))
    kinds = [json.loads(line)["type"] for line in first.splitlines()]
    assert kinds[0] == "brain-agent-export"
    assert {"agent", "guide", "memo", "skill", "entry", "memory", "relation"} <= set(kinds)

    _wipe("copilot")
    # the agent row stays, so its memo and guide come back only with `replace`
    result = agent_import(actor=Principal.for_user(world.admin), lines=io.StringIO(first), replace=True)
    assert result["written"]["memories"] == sum(k == "memory" for k in kinds)
    again = _export(Agent.objects.get(name="copilot"))
    assert _unauthored(again) == _unauthored(first)
    assert {(r.get("author_kind"), r.get("author_name")) for r in map(json.loads, again.splitlines())} <= {
        (None, None),
        ("person", "adam"),
    }

    revised = Memory.objects.get(text="Bob Okafor owns billing.")
    assert [v.text for v in revised.versions.order_by("version")] == [
        "Bob owns billing.",
        "Bob Okafor owns billing.",
    ]
    source = revised.sources.get()
    assert (source.kind, source.ref) == ("ticket", "INC-1") and source.fingerprint  # provenance kept
    assert AuditEvent.objects.filter(action="agent.imported").count() == 1


def test_importing_the_same_file_twice_changes_nothing(world):
    _knowledge(world)
    text = _export(world.copilot)
    _wipe("copilot")
    admin = Principal.for_user(world.admin)
    agent_import(actor=admin, lines=io.StringIO(text))
    before, events = _counts(), AuditEvent.objects.count()
    result = agent_import(actor=admin, lines=io.StringIO(text))
    assert not any(result["written"].values())
    assert _counts() == before and AuditEvent.objects.count() == events


def test_a_bad_file_is_refused_line_by_line_and_writes_nothing(world):
    _knowledge(world)
    lines = _export(world.copilot).splitlines()
    memory_line, other = [i for i, line in enumerate(lines) if '"type": "memory"' in line][:2]
    bad = json.loads(lines[memory_line])
    bad["status"] = "happy"
    lines[memory_line] = json.dumps(bad)
    bad = json.loads(lines[other])
    bad["entry"] = "e99"
    lines[other] = json.dumps(bad)
    lines.insert(3, "{not json")
    before = _counts()
    with pytest.raises(Invalid) as info:
        agent_import(
            actor=Principal.for_user(world.admin), lines=io.StringIO("\n".join(lines)), as_name="copy"
        )
    errors = info.value.fields["file"]
    assert errors[0].startswith("line 4: not JSON")
    statuses = "queued, active, superseded, rejected, invalidated, expired"
    assert f"line {memory_line + 2}: memory status: must be one of {statuses}" in errors
    assert f"line {other + 2}: memory entry: e99 is not in the file" in errors
    assert _counts() == before and not Agent.objects.filter(name="copy").exists()


def test_a_bad_agent_name_is_refused(world):
    with pytest.raises(Invalid, match="not an agent name"):
        agent_import(
            actor=Principal.for_user(world.admin), lines=io.StringIO(_export(world.copilot)), as_name="a b"
        )


def test_only_admins_import(world):
    text = _export(world.copilot)
    from knowledge.errors import Refused

    with pytest.raises(Refused):
        agent_import(actor=Principal.for_user(world.reviewer), lines=io.StringIO(text), as_name="copy")


def _in_shared_stores():
    return (
        sorted(
            Memory.objects.exclude(store="self")
            .exclude(store__startswith="private:")
            .values_list("store", "text")
        ),
        sorted(
            Entry.all_objects.exclude(store="self")
            .exclude(store__startswith="private:")
            .values_list("store", "name")
        ),
    )


def test_the_same_brain_import_under_a_new_name_leaves_shared_stores_unchanged(world, tmp_path):
    """A copy of an agent in its own Brain brings its own stores (self, private, memo, guide,
    skill overlays); the shared memories and entries are the workspace's and already there."""
    _knowledge(world)
    path = tmp_path / "copilot.jsonl"
    call_command("export_agent", "copilot", "--output", str(path), stderr=io.StringIO())
    shared_before = _in_shared_stores()
    own = Memory.objects.filter(owner=world.copilot, store="self").count()
    out = io.StringIO()
    call_command("import_agent", str(path), "--as", "copilot2", stdout=out)
    assert "Imported into copilot2 (new)" in out.getvalue() and "left out" in out.getvalue()
    copy = Agent.objects.get(name="copilot2")
    assert _in_shared_stores() == shared_before
    assert Memory.objects.filter(owner=copy, store="self").count() == own > 0  # the lessons
    assert PinnedMemo.objects.get(agent=copy).text == "Answer in English."
    assert CurationGuide.objects.get(owner=copy).update_rules == "Date every fact."
    assert AgentSkill.objects.filter(agent=copy, skill__name="triage").exists()

    # Asked for, the shared stores are deduplicated by content: everything is already there.
    out = io.StringIO()
    call_command("import_agent", str(path), "--as", "copilot2", "--with-shared", stdout=out)
    assert _in_shared_stores() == shared_before
    assert "already present (skipped)" in out.getvalue()


def test_the_command_refuses_a_file_without_the_header(world, tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text('{"type": "something else"}\n')
    with pytest.raises(CommandError, match="line 1: the first line must be the header"):
        call_command("import_agent", str(path))


def test_the_console_export_is_for_admins_and_downloads_the_file(client, world):
    client.force_login(world.reviewer)
    assert client.get("/agents/copilot/export.jsonl").status_code == 403
    assert client.post("/agents/import").status_code == 403
    client.force_login(world.admin)
    response = client.get("/agents/copilot/export.jsonl")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="copilot.brain.jsonl"'
    assert json.loads(response.content.decode().splitlines()[0])["type"] == "brain-agent-export"
    refused = client.post("/agents/import", {})
    assert refused.status_code == 400 and "Choose a file" in refused.content.decode()


def _citing(world):
    """Rows of the copilot that name each other: a memory citing another memory and an entry,
    a newer memory superseding the older, a relation whose evidence is a block; and an entry
    of the workspace (shared), which a copy under a new name leaves out."""
    agent = world.copilot
    old = factory.make_memory(agent, "VPN-4012 is fixed by client 5.2.0.")
    vpn = factory.make_entry(agent, name="VPN", store="self", blocks=["Client 5.2.1 fixes sleep drops."])
    desk = factory.make_entry(agent, name="IT desk", store="self", blocks=["Open 8-18."])
    runbook = factory.make_entry(agent, name="Runbook", blocks=["Reboot first."])
    new = factory.make_memory(
        agent,
        "VPN-4012 is fixed by client 5.2.1.",
        supersedes=old,
        sources=[
            {"kind": "memory", "ref": str(old.pk)},
            {"kind": "entry", "ref": str(vpn.pk)},
            {"kind": "entry", "ref": str(runbook.pk)},
        ],
    )
    block = vpn.blocks.get()
    relation_add(
        actor=Principal.for_user(world.admin),
        entry_id=vpn.pk,
        predicate="supported by",
        target_id=desk.pk,
        sources=[{"kind": "memory", "ref": str(block.pk)}],
    )
    return old, new, vpn, runbook


def _cited_by(memory) -> set:
    return set(memory.sources.values_list("kind", "ref"))


def test_references_between_rows_of_the_file_become_the_rows_imported(world):
    """A source, supersession or relation evidence naming another row of the file names that
    row by its file ref, and the import cites the row it brought in — never the id the row had
    where it was exported (in another Brain, someone else's row)."""
    old, new, vpn, runbook = _citing(world)
    text = _export(world.copilot)
    sources = next(r["sources"] for r in map(json.loads, text.splitlines()) if r.get("text") == new.text)
    assert sorted(s["file_ref"][:1] for s in sources) == ["e", "e", "m"]

    # Under a new name in the same Brain: the copy cites the copy, not the original.
    agent_import(actor=Principal.for_user(world.admin), lines=io.StringIO(text), as_name="copilot2")
    copy = Agent.objects.get(name="copilot2")
    new2 = Memory.objects.get(owner=copy, text=new.text)
    old2 = Memory.objects.get(owner=copy, text=old.text)
    vpn2 = Entry.objects.get(owner=copy, name="VPN")
    original = {("memory", str(old.pk)), ("entry", str(vpn.pk)), ("entry", str(runbook.pk))}
    assert _cited_by(new) == original
    # The workspace's runbook stayed out of the copy: it keeps citing that one.
    assert _cited_by(new2) == {("memory", str(old2.pk)), ("entry", str(vpn2.pk)), ("entry", str(runbook.pk))}
    assert new2.supersedes_id == old2.pk
    relation = EntryRelation.objects.get(source=vpn2)
    assert relation.sources == [{"kind": "memory", "ref": str(vpn2.blocks.get().pk)}]
    assert new2.sources.get(kind="memory").fingerprint  # fingerprinted as the copy is now

    # Into an empty Brain: the rows get new ids, the file reads the same when exported again.
    _wipe("copilot")
    agent_import(actor=Principal.for_user(world.admin), lines=io.StringIO(text))
    new3 = Memory.objects.get(owner=world.copilot, text=new.text)
    old3 = Memory.objects.get(owner=world.copilot, text=old.text)
    entries = dict(Entry.objects.filter(owner=world.copilot).values_list("name", "pk"))
    assert old3.pk != old.pk and _cited_by(new3) == {
        ("memory", str(old3.pk)),
        ("entry", str(entries["VPN"])),
        ("entry", str(entries["Runbook"])),
    }
    again = next(r for r in map(json.loads, _export(world.copilot).splitlines()) if r.get("text") == new.text)
    assert sorted((s["kind"], s["file_ref"]) for s in again["sources"]) == sorted(
        (s["kind"], s["file_ref"]) for s in sources
    )


@pytest.mark.parametrize(
    "change, told",
    [
        ("version1", "memory:{old} is an id in the Brain that exported this format-1 file"),
        ("dangling", "file_ref: m99 is not a memory of the file"),
        ("wrong kind", "file_ref: a ticket source is no row of the file"),
    ],
)
def test_a_reference_the_import_cannot_carry_over_is_refused_and_writes_nothing(world, change, told):
    old, new, *_ = _citing(world)
    rows = [json.loads(line) for line in _export(world.copilot).splitlines()]
    if change == "version1":
        rows[0]["version"] = 1
        for r in rows:
            for s in r.get("sources") or []:
                s.pop("file_ref", None) if isinstance(s, dict) else None
    else:
        citing = next(r for r in rows if r.get("text") == new.text)
        source = next(s for s in citing["sources"] if s["kind"] == "memory")
        source["file_ref"] = "m99"
        if change == "wrong kind":
            source["kind"] = "ticket"
    before = _counts()
    with pytest.raises(Invalid) as refused:
        agent_import(
            actor=Principal.for_user(world.admin),
            lines=io.StringIO("".join(json.dumps(r) + "\n" for r in rows)),
            as_name="copilot2",
        )
    assert told.format(old=old.pk) in str(refused.value.detail)
    assert _counts() == before


def test_a_cited_message_stays_tracked_only_where_it_is_the_message_cited(world):
    """A memory citing a message by id: imported into the Brain it came from, the source is
    still that message, tracked (a change of it still requeues the memory); imported where that
    id is another message (another Brain), it is kept as `elsewhere:<id>`, untracked — never
    shown as, nor checked against, a message it is not."""
    from memory.provenance.services import provenance_check

    [said] = factory.post_messages(world.general, [{"speaker": "alice", "text": "The printer code is 4471."}])
    factory.make_memory(
        world.copilot,
        "The printer code is 4471.",
        store="self",
        sources=[{"kind": "message", "ref": str(said)}],
    )
    text = _export(world.copilot)
    admin = Principal.for_user(world.admin)

    _wipe("copilot")
    agent_import(actor=admin, lines=io.StringIO(text))  # the Brain it came from
    source = MemorySource.objects.get(memory__text="The printer code is 4471.")
    assert (source.ref, source.state) == (str(said), "unchanged") and source.fingerprint

    # Elsewhere: the same id names another message (here: the message says something else now).
    from knowledge.models import Message

    Message.objects.filter(pk=said).update(text="Lunch is at noon.")
    _wipe("copilot")
    agent_import(actor=admin, lines=io.StringIO(text))
    memory = Memory.objects.get(text="The printer code is 4471.")
    source = memory.sources.get()
    assert (source.kind, source.ref, source.state, source.fingerprint) == (
        "message",
        f"elsewhere:{said}",
        "untracked",
        "",
    )
    status = memory.status
    provenance_check(actor=factory.SYSTEM)  # the check leaves it alone: nothing here to compare
    memory.refresh_from_db()
    assert memory.status == status and memory.sources.get().state == "untracked"
    assert not memory.status_reason.startswith("re-check")
