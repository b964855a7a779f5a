"""The restore drill: seed a Brain on an embedded PostgreSQL of its own → `manage.py backup` →
a new, empty data directory and media folder → `manage.py restore` → every table's row count and
every original's sha256 equal, and a search answers the same. Also: restore refuses a target
that is not empty unless --force."""

import json
import tarfile

SEED = r"""
from django.db import transaction
from knowledge.materials import services as materials
from tests import factory
agent = factory.make_agent("drill", trusted=True)
channel = factory.make_channel("drill-room")
factory.make_conversation(agent, channel)
for text in ["The VPN drops after the 4.2 client update; reinstall the profile.",
             "Backups run nightly at 02:00 UTC to the office NAS.",
             "Alice prefers tea over coffee in the afternoon."]:
    factory.make_memory(agent, text, store="shared")
factory.make_queued_memory(agent, "Bob may switch to the night shift.")
factory.make_entry(agent, name="VPN runbook", blocks=["Reinstall the VPN profile after client updates."])
factory.post_messages(channel, [{"speaker": "alice", "text": "the vpn dropped again after the update"},
                                {"speaker": "bob", "text": "reinstalling the profile fixed it for me"}])
materials.material_upload(actor=factory.SYSTEM, owner=agent, store="shared", filename="vpn.md",
                          data=b"# VPN\n\nReinstall the profile after every client update.\n")
materials.material_upload(actor=factory.SYSTEM, owner=agent, store="shared", filename="nas.txt",
                          data=b"The NAS keeps 30 nightly snapshots.\n" * 40)
factory.embed_all()
"""

SEARCH = r"""
import json
from knowledge.backup import table_counts
from knowledge.models import Agent, Channel
from knowledge.principal import Principal
from memory.recall import memory_search, resolve_scope
agent = Agent.objects.get(name="drill")
scope = resolve_scope(Principal.system("drill"), agent=agent, channel=Channel.objects.get(name="drill-room"))
out = memory_search(scope, q="vpn drops after the update", k=5)
print("RESULT", json.dumps([[i.candidate.kind, i.candidate.id, i.text] for i in out.items]))
print("COUNTS", json.dumps(table_counts()))
"""


def drill_search(site, before: str = "", after: str = "") -> tuple[list, dict]:
    """The drill search's results and every table's row count (then `after` runs)."""
    out = site.tagged(before + SEARCH + after)
    return out["RESULT"], out["COUNTS"]


def test_backup_wipe_restore_gives_back_every_row_and_original(tmp_path, migrated_pgdata, sites):
    source = sites("source", migrated_pgdata)
    answer, counts = drill_search(source, before=SEED)
    assert answer and "vpn" in answer[0][2].lower()

    archive = tmp_path / "brain.tar"
    out = source.manage("backup", str(archive)).stdout
    assert "2 original(s)" in out
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
        names = tar.getnames()
    assert manifest["counts"] == counts
    assert counts["knowledge_memory"] >= 5 and counts["knowledge_materialversion"] == 2
    assert "database.dump" in names and len(manifest["materials"]["originals"]) == 2
    for original in manifest["materials"]["originals"]:
        assert original["sha256"] == original["recorded_sha256"]
        assert "materials/" + original["path"] in names

    # "Wipe": a new machine — an empty data directory and an empty media folder. Something that
    # is not a Brain backup is refused first.
    target = sites("target")
    junk = tmp_path / "junk.tar"
    with tarfile.open(junk, "w") as tar:
        tar.add(__file__, arcname="notes.txt")
    refused = target.manage("restore", str(junk), check=False)
    assert refused.returncode != 0 and "not a Brain backup" in refused.stderr

    restored = target.manage("restore", str(archive))
    assert "every count and checksum matches" in restored.stdout, restored.stderr
    assert target.originals() == source.originals() and len(target.originals()) == 2
    # The same answer and counts; then one more row, so the target is no longer what was backed up.
    again_answer, again_counts = drill_search(
        target, after="from tests import factory\nfactory.make_agent('extra')\n"
    )
    assert again_answer == answer and again_counts == counts

    # A restore into the non-empty target is refused and changes nothing …
    again = target.manage("restore", str(archive), check=False)
    assert again.returncode != 0 and "not empty" in again.stderr and "--force" in again.stderr
    # … unless forced, after which everything matches again (the extra row is gone).
    forced = target.manage("restore", "--force", str(archive))
    assert "every count and checksum matches" in forced.stdout
    assert drill_search(target) == (answer, counts)
