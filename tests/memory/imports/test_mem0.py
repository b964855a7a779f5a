"""`manage.py import_mem0`: a Mem0 export becomes the agent's Brain memories through the normal
write path, once, and a bad file writes nothing.

The files are written from Mem0's documented shapes, not produced by mem0ai here (it needs a
model and a vector store to add memories): `mem0_get_all.json` is what the open-source
`Memory.get_all()` returns since mem0 1.1 (`{"results": [MemoryItem…]}`: `id`, `memory`,
`hash`, `metadata`, `created_at`, `updated_at`, with `user_id`, `agent_id`, `run_id`,
`actor_id` and `role` promoted from the payload, as mem0/memory/main.py builds them); the REST
export is the platform's `MemoryClient.get_all()` list (`categories`, `app_id`, …)."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import AuditEvent, Memory, MemorySource, Person
from knowledge.principal import Principal
from memory.imports.mem0 import mem0_parse
from tests import factory

GET_ALL = Path(__file__).with_name("mem0_get_all.json")
REST_EXPORT = [
    {
        "id": "f3a1c2b4-0000-4000-8000-000000000001",
        "memory": "Works in the Lisbon office",
        "user_id": "bob",
        "agent_id": None,
        "app_id": "helpdesk",
        "run_id": None,
        "hash": "1b2c3d",
        "metadata": None,
        "categories": ["professional_details"],
        "created_at": "2026-06-01T08:00:00-07:00",
        "updated_at": "2026-06-01T08:00:00-07:00",
        "expiration_date": None,
    }
]

pytestmark = pytest.mark.django_db


def _import(path, agent="scribe", **options):
    out, err = io.StringIO(), io.StringIO()
    call_command("import_mem0", str(path), agent=agent, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_a_get_all_export_becomes_the_agents_memories_once(world):
    out, err = _import(GET_ALL)
    assert "Imported 3 of 3 Mem0 memories for scribe; 0 were already imported." in out
    assert "3/3 memories" in err  # the progress line
    rows = {
        m.sources.get().ref: m for m in Memory.objects.filter(owner=world.scribe).prefetch_related("sources")
    }
    assert set(rows) == {
        "mem0:0c3b5b6e-8f0f-4bfa-9a83-6a1f2e0d4c11",
        "mem0:7d2a9e41-1c55-4e0b-8f3a-2b9c6d7e8f90",
        "mem0:b61f3c2d-5a47-4c89-bd0e-9e8f7a6b5c4d",
    }
    vpn = rows["mem0:7d2a9e41-1c55-4e0b-8f3a-2b9c6d7e8f90"]
    assert vpn.text == "Uses VPN client 5.2.1 on a work laptop"
    # Alice's memories land in her private store of the agent (the person is created).
    assert vpn.status == Memory.ACTIVE and vpn.store == "private:alice" and vpn.category == "mem0"
    assert vpn.sources.get().kind == "record"
    assert vpn.value["mem0"] == {
        "id": "7d2a9e41-1c55-4e0b-8f3a-2b9c6d7e8f90",
        "user_id": "alice",
        "agent_id": "support-bot",
        "run_id": "ticket-4012",
        "hash": "9a8b7c6d5e4f30211f2e3d4c5b6a7988",
        "created_at": "2026-03-02T09:15:04.551020-08:00",
        "updated_at": "2026-04-11T16:02:37.004512-07:00",
    }
    assert vpn.valid_from.isoformat() == "2026-03-02T17:15:04.551020+00:00"
    assert rows["mem0:b61f3c2d-5a47-4c89-bd0e-9e8f7a6b5c4d"].value["mem0"]["metadata"] == {
        "source": "runbook",
        "priority": 2,
    }
    # Each write went the normal way, with its audit event.
    written = AuditEvent.objects.filter(
        action="memory.written", object_type="memory", actor_name="import_mem0"
    )
    assert sorted(int(i) for e in written for i in e.object_ids) == sorted(m.pk for m in rows.values())

    out, _ = _import(GET_ALL)
    assert "Imported 0 of 3 Mem0 memories for scribe; 3 were already imported." in out
    assert Memory.objects.filter(owner=world.scribe).count() == 3


def test_an_untrusted_agents_import_waits_for_review(world):
    out, _ = _import(GET_ALL, agent="copilot")
    assert "Imported 3 of 3 Mem0 memories for copilot, 3 waiting for review" in out
    assert set(Memory.objects.filter(owner=world.copilot).values_list("status", flat=True)) == {Memory.QUEUED}
    out, _ = _import(GET_ALL, agent="copilot")  # queued ones count as imported
    assert "Imported 0 of 3" in out


def test_the_rest_export_and_json_lines_are_read_too(world, tmp_path):
    rest = tmp_path / "export.json"
    rest.write_text(json.dumps(REST_EXPORT))
    out, _ = _import(rest)
    assert "Imported 1 of 1" in out
    row = Memory.objects.get(owner=world.scribe)
    assert (
        row.value["mem0"]["categories"] == ["professional_details"]
        and row.value["mem0"]["app_id"] == "helpdesk"
    )

    lines = tmp_path / "export.jsonl"
    items = json.loads(GET_ALL.read_text())["results"]
    lines.write_text("\n".join(json.dumps(i) for i in items) + "\n")
    out, _ = _import(lines)
    assert "Imported 3 of 3" in out


@pytest.mark.parametrize(
    "content, told",
    [
        ('{"results": [{"id": "a", "memory": "x"},\n  {"id": "b", "memory": }]}', "line 2: not JSON"),
        ('{"id": "a", "memory": "one"}\n{"id": "b", "memory": "two"\n', "line 2: not JSON"),
        ('{"results": [{"id": "a", "memory": "one"}, {"id": "b"}]}', "item 2 (b): no memory text."),
        ('[{"id": "a", "memory": "one"}, {"memory": "two"}]', "item 2: no id."),
        (
            '[{"id": "a", "memory": "one"}, {"id": "a", "memory": "two"}]',
            "item 2: id a again (first at item 1).",
        ),
        (
            '[{"id": "a", "memory": "x", "created_at": "last tuesday"}]',
            "item 1 (a): created_at is not a date",
        ),
        (
            '[{"id": "a", "memory": "x"}, {"id": "b", "memory": "y", "updated_at": "2025-02-30T10:00:00"}]',
            "item 2 (b): updated_at is not a date and time ('2025-02-30T10:00:00')",
        ),
        ('[{"id": "a", "memory": "x", "metadata": "vip"}]', "item 1 (a): metadata must be an object."),
        ('{"memories_count": 2}', 'item 0: expected a list of memories or {"results": [...]}.'),
    ],
)
def test_a_bad_file_writes_nothing_and_names_the_bad_line_or_item(world, tmp_path, content, told):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CommandError) as refused:
        _import(path)
    assert told in str(refused.value) and "Nothing was imported." in str(refused.value)
    assert Memory.objects.count() == 0 and MemorySource.objects.count() == 0


def test_a_write_brain_refuses_leaves_nothing_behind(world):
    with pytest.raises(CommandError) as refused:
        _import(GET_ALL, scope="private:nobody")
    assert "Nothing was imported." in str(refused.value)
    assert Memory.objects.count() == 0
    with pytest.raises(CommandError, match="There is no agent named ghost."):
        _import(GET_ALL, agent="ghost")


def test_parse_keeps_the_file_order():
    assert [m.id for m in mem0_parse(GET_ALL.read_text())] == [
        "0c3b5b6e-8f0f-4bfa-9a83-6a1f2e0d4c11",
        "7d2a9e41-1c55-4e0b-8f3a-2b9c6d7e8f90",
        "b61f3c2d-5a47-4c89-bd0e-9e8f7a6b5c4d",
    ]


def test_a_memory_repeating_another_is_not_stored_twice_and_a_rerun_says_so(world, tmp_path):
    path = tmp_path / "repeats.json"
    path.write_text(
        json.dumps(
            [
                {"id": "a", "memory": "Prefers answers in French"},
                {"id": "b", "memory": "prefers answers in  French"},
            ]
        )
    )
    out, _ = _import(path)
    assert (
        "Imported 1 of 2 Mem0 memories for scribe; 0 were already imported; "
        "1 said exactly what a memory of scribe says (not stored twice)." in out
    )
    # The repeat's Mem0 id became a source of the memory it repeats, so a rerun knows both.
    out, _ = _import(path)
    assert "Imported 0 of 2 Mem0 memories for scribe; 2 were already imported." in out
    assert Memory.objects.filter(owner=world.scribe).count() == 1
    memory = Memory.objects.get(owner=world.scribe)
    assert sorted(memory.sources.values_list("ref", flat=True)) == ["mem0:a", "mem0:b"]


@pytest.mark.parametrize(
    "item, field",
    [
        ({"memory": "x" * 2_000_000}, "text"),
        ({"memory": "ok", "metadata": {"blob": "y" * 300_000}}, "value"),
        ({"memory": "a NUL \x00 inside"}, "text"),
    ],
)
def test_an_oversized_or_unstorable_memory_is_refused_before_anything_is_written(
    world, tmp_path, item, field
):
    """One limit for text and value on every route, imports included: the item is refused
    naming its field, and none of the file's memories is stored."""
    path = tmp_path / "big.json"
    items = [{"id": f"id-{n}", "memory": f"fine memory {n}"} for n in range(5)]
    items.insert(3, {"id": "big", **item})
    path.write_text(json.dumps(items))
    with pytest.raises(CommandError) as refused:
        _import(path)
    assert "mem0:big" in str(refused.value) and f"{field}:" in str(refused.value)
    assert Memory.objects.count() == 0


def test_the_api_and_the_row_constructor_hold_the_same_limit(world):
    from knowledge.errors import Invalid
    from knowledge.memories.rows import memory_row_new

    too_big = {"scope": "agent", "text": "ok", "key": "k", "value": {"blob": "y" * 70_000}}
    response = world.client("scribe").post("/api/memory", too_big, format="json")
    assert response.status_code == 400 and "value" in response.json()["fields"]
    with pytest.raises(Invalid) as refused:
        memory_row_new(
            owner=world.scribe, store="self", text="z" * 20_001, author_kind="agent", author_name="x"
        )
    assert "text" in refused.value.detail
    assert Memory.objects.count() == 0


TWO_PEOPLE = [
    {"id": f"a-{n}", "memory": text, "user_id": "alice"}
    for n, text in enumerate(["Works in the Berlin office", "Prefers tea", "Has a dog named Rex"])
] + [
    {"id": f"b-{n}", "memory": text, "user_id": "bob"}
    for n, text in enumerate(["Works in the Lisbon office", "Prefers coffee"])
]


def test_a_two_person_migration_keeps_each_persons_memories_apart(world, tmp_path):
    """Mem0's user_id becomes the person's private store of the agent: in the agent's direct
    message with Alice, "Where does Alice work?" finds her office and never Bob's."""
    world.copilot.trusted = True
    world.copilot.save(update_fields=["trusted"])
    path = tmp_path / "people.json"
    path.write_text(json.dumps({"results": TWO_PEOPLE}))
    out, _ = _import(path, agent="copilot")
    assert "copilot · private:alice (person alice): 3 to import" in out
    assert "copilot · private:bob (person bob): 2 to import" in out
    stores = dict(Memory.objects.filter(owner=world.copilot).values_list("text", "store"))
    assert stores["Works in the Berlin office"] == "private:alice"
    assert stores["Works in the Lisbon office"] == "private:bob"
    conversation = factory.make_conversation(world.copilot, world.dm_alice)
    found = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conversation.pk, "q": "Where does Alice work? office"},
        format="json",
    )
    texts = " ".join(item.get("text", "") for item in found.json()["results"])
    assert "Berlin" in texts and "Lisbon" not in texts


def test_a_dry_run_says_where_everything_lands_and_writes_nothing(world, tmp_path):
    path = tmp_path / "people.json"
    path.write_text(
        json.dumps(TWO_PEOPLE + [{"id": "x", "memory": "Team standup is at 9", "user_id": "a@b.c"}])
    )
    before = (Memory.objects.count(), AuditEvent.objects.count(), Person.objects.count())
    with pytest.raises(CommandError, match="map it with --map a@b.c=<person>"):
        _import(path, dry_run=True)
    out, _ = _import(path, dry_run=True, map=["a@b.c=carol"])
    assert "scribe · private:carol (person carol, new): 1 to import" in out
    assert "    mem0 x → scribe · private:carol · person carol · tier semantic" in out  # one line each
    assert "Dry run: nothing was written." in out
    assert (Memory.objects.count(), AuditEvent.objects.count(), Person.objects.count()) == before
    # The real run follows the same plan; a rerun leaves what is there where it is.
    _import(path, map=["a@b.c=carol"])
    assert Memory.objects.get(text="Team standup is at 9").store == "private:carol"
    out, _ = _import(path, map=["a@b.c=carol"])
    assert "private:carol (person carol): 0 to import, 1 already there" in out


def test_a_rerun_with_another_mapping_moves_nothing_unless_rescoped(world, tmp_path):
    """A second mapping says where the earlier import put each memory and leaves it there;
    --rescope (dry run first) moves it, with what superseded it there, in one audited step."""
    from memory.lifecycle.write import WriteRequest, memory_write

    path = tmp_path / "people.json"
    path.write_text(
        json.dumps(TWO_PEOPLE + [{"id": "x", "memory": "Team standup is at 9", "user_id": "a@b.c"}])
    )
    _import(path, map=["a@b.c=carol"])
    standup = Memory.objects.get(text="Team standup is at 9")
    later = memory_write(
        actor=Principal.system("test"),
        request=WriteRequest(
            owner=world.scribe, store="private:carol", text="Team standup is at 9:30", supersedes=standup
        ),
    )
    assert later.status == Memory.ACTIVE
    before = (AuditEvent.objects.count(), Person.objects.count())

    out, _ = _import(path, map=["a@b.c=dave"])
    assert (
        "scribe · private:dave (person dave, new): 0 to import; "
        "1 imported earlier into private:carol, left there (--rescope moves them here)" in out
    )
    assert "--rescope moves them." in out
    assert set(
        Memory.objects.filter(owner=world.scribe, text__startswith="Team").values_list("store", flat=True)
    ) == {"private:carol"}
    assert (AuditEvent.objects.count(), Person.objects.count()) == before

    out, _ = _import(path, map=["a@b.c=dave"], rescope=True, dry_run=True)
    assert "1 imported earlier into private:carol, would move here" in out and "Dry run" in out
    assert (AuditEvent.objects.count(), Person.objects.count()) == before

    out, _ = _import(path, map=["a@b.c=dave"], rescope=True)
    assert "1 imported earlier into private:carol, moved here" in out
    assert "Moved 2 memories of earlier imports to the stores this mapping names." in out
    assert set(Memory.objects.filter(pk__in=[standup.pk, later.pk]).values_list("store", flat=True)) == {
        "private:dave"
    }
    assert Memory.objects.get(pk=later.pk).status == Memory.ACTIVE  # moved as it was
    event = AuditEvent.objects.get(action="memory.rescoped")
    assert sorted(event.object_ids) == sorted([str(standup.pk), str(later.pk)])
    assert event.data == {"from": "private:carol", "to": "private:dave", "mem0_ids": ["x"]}
    assert Person.objects.filter(name="dave").exists()
    # Alice's and Bob's memories did not move; a re-run finds everything where it is now.
    assert Memory.objects.get(text="Works in the Lisbon office").store == "private:bob"
    out, _ = _import(path, map=["a@b.c=dave"])
    assert "private:dave (person dave): 0 to import, 1 already there" in out and "--rescope" not in out


def test_rescope_refuses_to_split_a_memory_two_mem0_ids_share(world, tmp_path):
    path = tmp_path / "repeats.json"
    items = [
        {"id": "a", "memory": "Prefers answers in French", "user_id": "u1"},
        {"id": "b", "memory": "prefers answers in French", "user_id": "u2"},
    ]
    path.write_text(json.dumps(items))
    _import(path, map=["u1=carol", "u2=carol"])
    memory = Memory.objects.get(owner=world.scribe)
    events = AuditEvent.objects.count()
    with pytest.raises(CommandError) as refused:
        _import(path, map=["u1=carol", "u2=dave"], rescope=True)
    assert "would land in private:carol and private:dave; map them to one store." in str(refused.value)
    assert "Nothing was imported." in str(refused.value)
    assert Memory.objects.get(owner=world.scribe).store == "private:carol" == memory.store
    assert AuditEvent.objects.count() == events and not Person.objects.filter(name="dave").exists()


def test_statements_do_not_grow_with_the_number_of_people(world):
    """A file of many people lands in as many private stores: one batch for them all, the new
    people created together (97 people took 1,754 statements for 1,000 memories, 18 a store)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.imports.mem0 import Mem0Memory, mem0_import

    def memories(people, offset):
        return [
            Mem0Memory(
                id=f"m-{offset + i}",
                text=f"User {i % people} had a VPN problem fixed by step {offset + i}",
                created_at=None,
                value={"mem0": {"user_id": f"user-{offset}-{i % people}"}},
            )
            for i in range(200)
        ]

    counts = []
    for people, offset in ((1, 0), (50, 1000)):
        with CaptureQueriesContext(connection) as queries:
            result = mem0_import(agent=world.scribe, memories=memories(people, offset))
        assert result.imported == 200
        counts.append(len(queries))
    assert counts[1] <= counts[0] + 2, counts
    assert Person.objects.filter(name__startswith="user-1000-").count() == 50
    created = AuditEvent.objects.filter(action="person.created").order_by("-id").first()
    assert len(created.object_ids) == 50  # one event names the 50 people the second file brought


def test_a_user_id_that_is_a_staff_members_name_is_refused_once_until_mapped(world, tmp_path):
    """Mem0 user id `rita` is also the reviewer's sign-in name: the memories would land in a
    private store named after a colleague. Refused, once however many memories it has, until
    --map says whose they are."""
    path = tmp_path / "rita.json"
    path.write_text(
        json.dumps(
            [{"id": f"r{i}", "memory": f"Rita's order {i} shipped", "user_id": "Rita"} for i in range(3)]
        )
    )
    with pytest.raises(CommandError) as refused:
        _import(path, dry_run=True)
    assert str(refused.value).count("staff member's sign-in name") == 1
    with pytest.raises(CommandError):
        _import(path)
    assert not Memory.objects.filter(text__startswith="Rita's order").exists()
    out, _ = _import(path, dry_run=True, map=["Rita=rita-customer"])
    assert "private:rita-customer" in out
