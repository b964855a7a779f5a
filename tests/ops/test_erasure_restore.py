"""Backups don't resurrect (issue 60.3): a backup taken before a person is erased, restored over
the same Brain with `manage.py restore --force`, brings nothing erased back — the ledger file
outside the database is re-applied by the restore itself — and `manage.py erase --reapply` is
idempotent afterwards."""

import json

TOKEN = "qpzmerasedtoken4410"

SEED = rf"""
from tests import factory
from knowledge.models import Channel
agent = factory.make_agent("drill", trusted=True)
alice = factory.make_person("alice")
dm = factory.make_channel("dm-alice", kind=Channel.KIND_DM, person=alice, agent=agent)
ids = factory.post_messages(dm, [{{"speaker": "alice", "text": "my locker code is {TOKEN}-dm"}}])
factory.make_memory(agent, "Alice's locker code is {TOKEN}-private", store="private:alice")
factory.make_memory(agent, "Lunch is at noon", store="shared")
"""

HOLDING = rf"""
import json
from tests.knowledge.erasure.sweep import database_rows_holding
print("HITS", json.dumps(database_rows_holding("{TOKEN}")))
"""


def test_a_restored_backup_from_before_an_erasure_brings_nothing_erased_back(
    tmp_path, migrated_pgdata, sites
):
    site = sites("site", migrated_pgdata)
    assert site.tagged(SEED + HOLDING)["HITS"], "the token was planted"
    archive = tmp_path / "before.tar"
    site.manage("backup", str(archive))

    erased = site.manage("erase", "--person", "alice", "--reason", "asked to be forgotten")
    assert erased.stdout.startswith("Erased (ledger entry"), erased.stderr
    assert site.tagged(HOLDING)["HITS"] == []
    ledger = (site.var / "erasure-ledger.jsonl").read_text().splitlines()
    assert ledger and all(TOKEN not in line for line in ledger)
    assert {json.loads(line)["kind"] for line in ledger} >= {"memory", "message"}

    restored = site.manage("restore", "--force", str(archive))

    assert "Erasure ledger re-applied" in restored.stdout, restored.stderr
    assert site.tagged(HOLDING)["HITS"] == []
    again = site.manage("erase", "--reapply")
    assert "erased again: 0 memories, 0 messages, 0 episodes, 0 entries, 0 materials" in again.stdout
