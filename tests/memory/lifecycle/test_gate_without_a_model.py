"""While no model is set, shadow mode's eval gate stays quiet (issue 53): an admin's edit queues
no check and writes no gate audit event, since the check could only end "not checked"; once a
model is set, the same edit is checked again."""

import pytest

from knowledge.models import AuditEvent, ModelJob
from memory.gate.datasets import dataset_create
from memory.models import GateCheck
from memory.tasks import gate_run_pending
from tests import factory
from tests.factory import SYSTEM

pytestmark = pytest.mark.django_db
CASES = [{"id": "vpn", "input": "Which VPN client fixes VPN-4012?", "expect": {"contains": ["5.2.1"]}}]


def admin_edits(world, django_capture_on_commit_callbacks):
    """An admin writes an entry with a block and adds one in the console (route entry_block)."""
    world_client = world.client("admin")
    with django_capture_on_commit_callbacks(execute=True):
        entry = factory.make_entry(world.copilot, name="VPN", blocks=["The VPN portal is vpn.example.com"])
    with django_capture_on_commit_callbacks(execute=True):
        answer = world_client.post(
            f"/api/entries/{entry.pk}/blocks", {"text": "Client 5.2.1 fixes VPN-4012."}, format="json"
        )
    assert answer.status_code in (200, 201), answer.json()
    gate_run_pending()


def gate_events() -> list[str]:
    return list(AuditEvent.objects.filter(action__startswith="memory.gate.").values_list("action", flat=True))


def test_an_admin_edit_without_a_model_queues_no_check_and_audits_nothing(
    world, settings, django_capture_on_commit_callbacks
):
    assert settings.BRAIN_MEMORY_ACTIVATION_GATE == "shadow" and settings.BRAIN_MODEL_BASE_URL == ""
    dataset_create(actor=SYSTEM, name="memory-gate-copilot", kind="agent_turn", cases=CASES)
    admin_edits(world, django_capture_on_commit_callbacks)
    assert gate_events() == []
    assert not GateCheck.objects.exists() and not ModelJob.objects.filter(kind="gate.check").exists()


def test_with_a_model_the_same_edit_is_checked(world, model_stub, django_capture_on_commit_callbacks):
    dataset_create(actor=SYSTEM, name="memory-gate-copilot", kind="agent_turn", cases=CASES)
    model_stub.respond_with(lambda body: "Use client 5.2.1")
    admin_edits(world, django_capture_on_commit_callbacks)
    assert gate_events() == ["memory.gate.pass", "memory.gate.pass"]
