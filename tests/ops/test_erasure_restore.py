"""Backups don't resurrect (issue 60.3): a backup taken before a person, a memory, a conversation
and a material are erased, restored over the same Brain with `manage.py restore --force`, brings
nothing erased back — not in any column, not in a search, not as a stored original — because the
restore re-applies the ledger file kept outside the database; `manage.py erase --reapply` is
idempotent afterwards."""

import json

TOKEN = "qpzmerasedtoken4410"

SEED = rf"""
import json
from knowledge.materials import services as materials
from tests import factory
from knowledge.models import Channel
agent = factory.make_agent("drill", trusted=True)
alice = factory.make_person("alice")
dm = factory.make_channel("dm-alice", kind=Channel.KIND_DM, person=alice, agent=agent)
ids = factory.post_messages(dm, [{{"speaker": "alice", "text": "my locker code is {TOKEN}-dm"}}])
factory.make_memory(agent, "Alice's locker code is {TOKEN}-private", store="private:alice")
factory.make_memory(agent, "Lunch is at noon", store="shared")
memory = factory.make_memory(agent, "The alarm code is {TOKEN}-memory", store="shared")
room = factory.make_channel("room")
conversation = factory.make_conversation(agent, room)
factory.post_messages(room, [{{"speaker": "bob", "text": "the wifi key is {TOKEN}-conversation"}}])
material = materials.material_paste(actor=factory.SYSTEM, owner=agent, store="shared",
                                    title="Safe manual", text="The safe opens with {TOKEN}-material.")
print("IDS", json.dumps({{"memory": memory.pk, "conversation": conversation.pk, "material": material.pk}}))
"""

HOLDING = rf"""
import json
from knowledge.models import Agent, Channel
from knowledge.principal import Principal
from memory.recall import memory_search, resolve_scope
from tests.knowledge.erasure.sweep import database_rows_holding
print("HITS", json.dumps(database_rows_holding("{TOKEN}")))
scope = resolve_scope(Principal.system("drill"), agent=Agent.objects.get(name="drill"),
                      channel=Channel.objects.get(name="room"))
found = memory_search(scope, q="{TOKEN}", k=20)
print("FOUND", json.dumps([i.text for i in found.items if "{TOKEN}" in (i.text or "")]))
"""


def _originals_holding(site) -> list[str]:
    folder = site.var / "media" / "materials"
    return [str(p) for p in folder.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]


def test_a_restored_backup_from_before_an_erasure_brings_nothing_erased_back(
    tmp_path, migrated_pgdata, sites
):
    site = sites("site", migrated_pgdata)
    ids = site.tagged(SEED)["IDS"]
    before = site.tagged(HOLDING)
    assert before["HITS"] and before["FOUND"], "the token was planted and is found"
    assert _originals_holding(site), "the material's original holds the token"
    archive = tmp_path / "before.tar"
    site.manage("backup", str(archive))

    erased = site.manage("erase", "--person", "alice", "--reason", "asked to be forgotten")
    assert erased.stdout.startswith("Erased (ledger entry"), erased.stderr
    for kind, ref in ids.items():
        done = site.manage("erase", f"--{kind}", str(ref), "--reason", "a secret")
        assert done.stdout.startswith("Erased (ledger entry"), done.stderr
    assert site.tagged(HOLDING) == {"HITS": [], "FOUND": []}
    assert _originals_holding(site) == []
    ledger = (site.var / "erasure-ledger.jsonl").read_text().splitlines()
    assert ledger and all(TOKEN not in line for line in ledger)
    assert {json.loads(line)["kind"] for line in ledger} >= {"memory", "message", "material", "entry"}

    restored = site.manage("restore", "--force", str(archive))

    assert "Erasure ledger re-applied" in restored.stdout, restored.stderr
    assert _originals_holding(site) == []
    assert site.tagged(HOLDING) == {"HITS": [], "FOUND": []}
    again = site.manage("erase", "--reapply")
    assert "erased again: 0 memories, 0 messages, 0 episodes, 0 entries, 0 materials" in again.stdout
