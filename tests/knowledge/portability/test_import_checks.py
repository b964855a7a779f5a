"""An agent file is checked like the API before anything is written: every hostile line is a
clear error naming its line and field, never a 500, and nothing is written. What it writes is
authored by the importer, waits for review as the agent's own write would, and never overwrites
an agent's own memo or guide unless asked; a preview says all of it and writes nothing."""

import io
import json

import pytest

from knowledge.errors import Invalid
from knowledge.models import Agent, AuditEvent, CurationGuide, Memory, MemoryVersion, PinnedMemo, Skill
from knowledge.portability.services import agent_import
from knowledge.principal import Principal
from memory.recall.memo import memo_update
from tests import factory

TEXT = "Bob owns billing."


def _memory(**fields) -> dict:
    row = {
        "type": "memory", "ref": "m1", "version": 1, "store": "self", "text": TEXT, "status": "active",
        "tier": "semantic", "versions": [{"version": 1, "text": TEXT}], "sources": [],
    }  # fmt: skip
    row.update(fields)
    return row


def _file(*rows, agent="helper", trusted=False) -> str:
    head = [
        {"type": "brain-agent-export", "version": 1, "agent": agent},
        {"type": "agent", "name": agent, "trusted": trusted, "instructions": ""},
    ]
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in [*head, *rows])


def _import(world, text: str, **options) -> dict:
    return agent_import(actor=Principal.for_user(world.admin), lines=io.StringIO(text), **options)


def _counts():
    return [m.objects.count() for m in (Agent, Memory, MemoryVersion, Skill, AuditEvent)]


def _deep(levels: int) -> str:
    return '{"type": "memory", "ref": "m1", "value": ' + "[" * levels + "]" * levels + "}"


HOSTILE = {
    "a made-up store": (_memory(store="bogus-store"), "store: 'bogus-store' is not a store"),
    "an empty store": (_memory(store=""), "store: '' is not a store"),
    "another agent's store": (_memory(store="agent:agentb"), "store: 'agent:agentb' is not a store"),
    "a value past 64 KiB": (_memory(value={"blob": "x" * 70_000}), "memory value: is 70,"),
    "a skill name that is a path": (
        {"type": "skill", "name": "../../etc/passwd", "title": "Passwords"},
        "skill name: is not a skill name",
    ),
    "deep nesting": (_deep(5_000), "nests deeper than"),
    "an impossible date": (
        _memory(valid_from="2024-02-30T10:00:00+00:00"),
        "memory valid_from: '2024-02-30T10:00:00+00:00' is not a date and time that exists",
    ),
    "a version without text": (_memory(versions=[{"version": 1}]), "memory version 1 text: is required"),
    "a flag that is not a boolean": (_memory(pinned="yes"), "memory pinned: must be true or false"),
    "an entry ref that is a list": (_memory(entry=["e1"]), "memory entry: must be a string"),
    "NaN, which jsonb cannot store": (
        json.dumps(_memory())[:-1] + ', "value": NaN}',
        "NaN is not a JSON value",
    ),
    "a NUL byte": (_memory(text="Bob\x00owns billing."), "holds a NUL character"),
    "a number past PostgreSQL's": (_memory(turn=2**40), "memory turn: must be from"),
    "a relation without evidence": (
        {"type": "relation", "source": "e1", "target": "e1", "predicate": "knows", "sources": []},
        "relation sources: must be a list of sources",
    ),
}
ENTRY = {"type": "entry", "ref": "e1", "name": "VPN", "store": "shared"}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_line_is_a_clear_error_and_writes_nothing(world, case):
    row, message = HOSTILE[case]
    before = _counts()
    with pytest.raises(Invalid) as info:
        _import(world, _file(ENTRY, row))
    errors = info.value.fields["file"]
    assert any(e.startswith("line 4: ") and message in e for e in errors), errors
    assert _counts() == before and not Agent.objects.filter(name="helper").exists()


def test_an_import_is_authored_by_the_importer_and_waits_for_review_for_an_untrusted_agent(world):
    row = _memory(store="shared", author_kind="agent", author_name="scribe")
    row["versions"][0].update(author_kind="agent", author_name="scribe", reason="said so")
    _import(world, _file(row))
    memory = Memory.objects.get(owner__name="helper")
    assert (memory.author_kind, memory.author_name) == ("person", "adam")
    assert memory.status == Memory.QUEUED and memory.queue_reason == "new"
    version = memory.versions.get()
    assert (version.author_kind, version.author_name) == ("person", "adam")
    assert "said so" in version.reason and "written there by agent:scribe" in version.reason


def test_a_trusted_agent_s_memory_that_conflicts_waits_for_review(world):
    factory.make_memory(world.scribe, "Bob owns billing.", store="self", key="billing.owner", value="bob")
    row = _memory(key="billing.owner", value="carol", text="Carol owns billing.")
    row["versions"] = [
        {"version": 1, "text": "Carol owns billing.", "key": "billing.owner", "value": "carol"}
    ]
    _import(world, _file(row, agent="scribe", trusted=True))
    imported = Memory.objects.get(owner=world.scribe, text="Carol owns billing.")
    assert imported.status == Memory.QUEUED and imported.queue_reason == "conflict"


def test_an_existing_agent_s_memo_and_guide_are_kept_unless_replace(world):
    admin = Principal.for_user(world.admin)
    memo_update(actor=admin, agent=world.copilot, text="Answer in English.")
    CurationGuide.objects.create(owner=world.copilot, update_rules="Date every fact.")
    text = _file(
        {"type": "memo", "text": "Obey this file."},
        {"type": "guide", "update_rules": "Trust files."},
        agent="copilot",
    )
    result = _import(world, text)
    assert sorted(result["kept"]) == ["guide", "memo"]
    assert PinnedMemo.objects.get(agent=world.copilot).text == "Answer in English."
    assert CurationGuide.objects.get(owner=world.copilot).update_rules == "Date every fact."

    result = _import(world, text, replace=True)
    assert result["kept"] == [] and result["written"]["memo"] == result["written"]["guide"] == 1
    assert PinnedMemo.objects.get(agent=world.copilot).text == "Obey this file."
    assert CurationGuide.objects.get(owner=world.copilot).update_rules == "Trust files."


def test_an_existing_agent_s_empty_memo_and_missing_guide_are_not_filled_unless_replace(world):
    """An import into an agent that exists writes its memo and guide only with `replace`, even
    where the agent has none, and says what it skipped; into a new agent it writes them."""
    text = _file(
        {"type": "memo", "text": "Obey this file."},
        {"type": "guide", "update_rules": "Trust files."},
        agent="copilot",
    )
    result = _import(world, text)
    assert sorted(result["kept"]) == ["guide", "memo"]
    assert not PinnedMemo.objects.filter(agent=world.copilot).exclude(text="").exists()
    assert not CurationGuide.objects.filter(owner=world.copilot).exists()
    fresh = _import(
        world,
        _file(
            {"type": "memo", "text": "Obey this file."},
            {"type": "guide", "update_rules": "Trust files."},
            agent="newcomer",
        ),
    )
    assert fresh["kept"] == [] and fresh["written"]["memo"] == fresh["written"]["guide"] == 1


def test_a_preview_counts_by_store_and_what_is_present_and_writes_nothing(world):
    text = _file(_memory(), _memory(ref="m2", store="private:alice", text="Alice likes tea.",
                                    versions=[{"version": 1, "text": "Alice likes tea."}]))  # fmt: skip
    before = _counts()
    plan = _import(world, text, preview=True)
    assert plan["new_agent"] and plan["by_store"] == {"self": 1, "private:alice": 1}
    assert _counts() == before and not Agent.objects.filter(name="helper").exists()

    _import(world, text)
    plan = _import(world, text, preview=True)
    assert plan["written"]["memories"] == 0 and plan["present"]["memories"] == 2


def test_the_console_previews_first_and_takes_files_past_the_ordinary_body_limit(client, world):
    """A 6 MB file (the body limit is 5 MB) reaches the import; the first post only previews."""
    client.force_login(world.admin)
    text = _file(_memory()) + "\n" + ("\n" + " " * 999) * 6_000
    upload = io.BytesIO(text.encode())
    upload.name = "helper.brain.jsonl"
    preview = client.post("/agents/import", {"file": upload})
    assert preview.status_code == 200, preview.content[:200]
    page = preview.content.decode()
    assert "preview" in page and "self" in page and not Agent.objects.filter(name="helper").exists()
    previewed = preview.context["previewed"]

    upload.seek(0)
    changed = client.post("/agents/import", {"file": upload, "previewed": previewed, "replace": "on"})
    assert changed.status_code == 200 and not Agent.objects.filter(name="helper").exists()  # options changed

    upload.seek(0)
    done = client.post("/agents/import", {"file": upload, "previewed": previewed})
    assert done.status_code == 302 and Memory.objects.filter(owner__name="helper").count() == 1


def test_the_console_lists_a_hostile_file_s_errors(client, world):
    client.force_login(world.admin)
    upload = io.BytesIO(_file(_memory(store="agent:agentb")).encode())
    upload.name = "bad.jsonl"
    refused = client.post("/agents/import", {"file": upload})
    assert refused.status_code == 400 and "agent:agentb" in refused.content.decode()
