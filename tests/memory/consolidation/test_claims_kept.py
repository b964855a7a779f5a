"""Merges and summaries keep every claim (issue 59.4), through a consolidation run with the
model stub proposing the text: a merge that moves a version into the wrong role, or a summary that
drops a fact, is not put in a plan — the originals stay as they are and the run says why."""

from knowledge.models import Memory
from memory.consolidation import consolidation_run
from memory.models import ConsolidationGroup
from tests.factory import SYSTEM
from tests.memory.consolidation.test_consolidation import remember


def _run(model_stub, text):
    model_stub.reply_json({"text": text})
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert model_stub.chat_requests(), "the model was asked for the group"
    return plan


def test_a_merge_that_swaps_which_version_fixes_is_refused(world, model_stub):
    fixed = remember(world.copilot, "Firmware 3.2.5 fixes printer error P0417 on the office printers")
    broken = remember(world.copilot, "Firmware 3.2.4 still shows printer error P0417 on the office printers")
    plan = _run(model_stub, "Firmware 3.2.4 fixes printer error P0417 on the office printers")
    assert not plan.groups.filter(kind=ConsolidationGroup.NEAR_DUPLICATE).exists()
    assert any(
        "does not keep every claim" in note or "changes what memory" in note for note in [plan.model_note]
    )
    assert set(Memory.objects.filter(pk__in=[fixed.pk, broken.pk]).values_list("status", flat=True)) == {
        "active"
    }


def test_a_faithful_merge_of_the_same_memories_is_planned(world, model_stub):
    remember(world.copilot, "Firmware 3.2.5 fixes printer error P0417 on the office printers")
    remember(world.copilot, "Firmware 3.2.4 still shows printer error P0417 on the office printers")
    plan = _run(
        model_stub,
        "Firmware 3.2.5 fixes printer error P0417 on the office printers; firmware 3.2.4 still shows it",
    )
    assert plan.groups.filter(kind=ConsolidationGroup.NEAR_DUPLICATE).count() == 1


def test_a_summary_that_drops_a_fact_is_refused(world, model_stub, settings):
    settings.BRAIN_CONSOLIDATION_SUMMARY_OVER = 3
    texts = [
        "VPN client 5.2.1 fixes error E4012 on laptops",
        "VPN client 5.1.8 shows error E4012 after sleep",
        "The VPN gateway vpn2 is down for maintenance on Sundays",
        "VPN access needs a hardware token since March",
        "Team lunch is on Thursdays",
    ]
    memories = [remember(world.copilot, t, category="it_note", age_days=20 - n) for n, t in enumerate(texts)]
    plan = _run(
        model_stub,
        "VPN client 5.2.1 fixes error E4012 on laptops; the gateway vpn2 is down for maintenance on "
        "Sundays; VPN access needs a hardware token since March",
    )
    assert not plan.groups.filter(kind=ConsolidationGroup.SUMMARY).exists()
    assert any("does not keep every claim" in note for note in [plan.model_note]), plan.model_note
    assert all(m.status == "active" for m in Memory.objects.filter(pk__in=[m.pk for m in memories]))
