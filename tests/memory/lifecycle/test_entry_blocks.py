"""Entry blocks pass the one activation function: an untrusted agent's block queues exactly like
its memories, and the eval gate checks blocks as it checks memories."""

import pytest

from knowledge.models import Memory
from memory.gate.datasets import dataset_create
from memory.lifecycle.selectors import review_queue
from memory.models import GateCheck
from tests.factory import SYSTEM
from tests.memory.gate.test_gate import BAD, CASES, GOOD, gated, run_checks, set_gate, write  # noqa: F401


def block_write(world, text, who):
    response = world.client(who).post(
        "/api/entries", {"name": f"VPN {who}", "scope": "shared", "blocks": [{"text": text}]}, format="json"
    )
    assert response.status_code == 201, response.json()
    return Memory.objects.get(pk=response.json()["blocks"][0]["id"])


def test_an_untrusted_agents_block_queues_exactly_like_its_memory(world):
    memory = write(world, "The VPN portal is vpn.example.com")
    block = block_write(world, "The VPN portal moved to vpn2.example.com", who="copilot")
    fields = ("status", "queue_reason", "status_reason", "store", "owner_id", "valid_from")
    assert [getattr(block, f) for f in fields] == [getattr(memory, f) for f in fields]
    assert block.status == Memory.QUEUED and block.queue_reason == "new"
    assert {item.memory.pk for item in review_queue(ids=[memory.pk, block.pk])} == {memory.pk, block.pk}

    approved = world.client("reviewer").post(f"/api/memory/{block.pk}/approve", {}, format="json")
    assert approved.status_code == 200, approved.json()
    block.refresh_from_db()
    assert block.status == Memory.ACTIVE and block.valid_from is not None


@pytest.mark.usefixtures("gated")
def test_the_enforcing_gate_holds_a_trusted_agents_regressing_block(world):
    set_gate("enforce")
    dataset_create(actor=SYSTEM, name="memory-gate", kind="agent_turn", cases=CASES)  # gates scribe
    harmless = block_write(world, GOOD, who="scribe")
    block = block_write(world, BAD, who="scribe")  # scribe is trusted: without the gate it is active
    for held in (harmless, block):  # held while the check runs in the background
        assert held.status == Memory.QUEUED and held.queue_reason == "gate"
    run_checks()
    harmless.refresh_from_db()
    assert harmless.status == Memory.ACTIVE
    assert GateCheck.objects.get(memory=harmless).verdict == "pass"
    block.refresh_from_db()
    assert block.status == Memory.QUEUED and block.queue_reason == "gate"
    assert "vpn-fix" in block.status_reason
    assert GateCheck.objects.get(memory=block).verdict == "regressed"


@pytest.mark.usefixtures("gated")
def test_the_gate_checks_an_untrusted_agents_block_when_it_is_approved(world):
    set_gate("enforce")
    block = block_write(world, BAD, who="copilot")
    assert block.status == Memory.QUEUED and not GateCheck.objects.filter(memory=block).exists()
    response = world.client("reviewer").post(f"/api/memory/{block.pk}/approve", {}, format="json")
    assert response.status_code == 200, response.json()
    run_checks()
    block.refresh_from_db()
    assert block.status == Memory.QUEUED and block.queue_reason == "gate"
    assert GateCheck.objects.get(memory=block).verdict == "regressed"
