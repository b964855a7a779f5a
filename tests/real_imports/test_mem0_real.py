"""The README's Mem0 export line against mem0ai itself (2.2.1, `make test-imports`), then
`manage.py import_mem0` on what it wrote: two people, 25 memories each (more than the 20
mem0ai's `get_all` returns unless asked), land in two private stores and stay apart."""

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from knowledge.models import Memory, MemorySource
from tests import factory

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
PEOPLE = {
    "alice": ["Works in the Berlin office"]
    + [f"Alice noted ticket {n} about the Berlin VPN" for n in range(24)],
    "bob": ["Works in the Lisbon office"]
    + [f"Bob noted ticket {n} about the Lisbon printer" for n in range(24)],
}


def test_the_readme_export_of_a_real_mem0_store_imports_two_people_apart(world, _model_stub_server, tmp_path):
    exported = subprocess.run(
        [
            os.environ["BRAIN_TEST_MEM0"],
            str(Path(__file__).with_name("mem0_export.py")),
            _model_stub_server.url,
            str(ROOT / "README.md"),
            str(tmp_path),
            json.dumps(PEOPLE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert json.loads(exported.stdout.strip().splitlines()[-1]) == {"alice": 25, "bob": 25}

    world.copilot.trusted = True
    world.copilot.save(update_fields=["trusted"])
    for person in PEOPLE:
        out = io.StringIO()
        call_command(
            "import_mem0", str(tmp_path / f"{person}.json"), agent="copilot", stdout=out, stderr=io.StringIO()
        )
        assert f"copilot · private:{person} (person {person}" in out.getvalue()
        assert "Imported 25 of 25 Mem0 memories for copilot; 0 were already imported." in out.getvalue()

    stores = dict(Memory.objects.filter(owner=world.copilot).values_list("text", "store"))
    assert {stores[t] for t in PEOPLE["alice"]} == {"private:alice"}
    assert {stores[t] for t in PEOPLE["bob"]} == {"private:bob"}
    assert MemorySource.objects.filter(kind="record", ref__startswith="mem0:").count() == 50
    conversation = factory.make_conversation(world.copilot, world.dm_alice)
    found = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conversation.pk, "q": "Where does Alice work? office"},
        format="json",
    )
    texts = " ".join(item.get("text", "") for item in found.json()["results"])
    assert "Berlin" in texts and "Lisbon" not in texts
