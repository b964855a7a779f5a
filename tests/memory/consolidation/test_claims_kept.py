"""Merges and summaries keep every claim (issue 59.4), through a consolidation run with the
model stub proposing the text: a merge that moves a version into the wrong role, or a summary that
drops a fact, is not put in a plan — the originals stay as they are and the run says why."""

import json
from pathlib import Path

import pytest

from knowledge.models import Memory
from memory.consolidation import consolidation_run
from memory.matching.kept import claims_kept
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


# The labelled candidates of shared/data/memory-pairs-dev-2/merges.jsonl (issue 59), proposed by
# the stub as the summary of their originals: the first two of each label (every one through
# `python -m bench merges --file`; a consolidation run per candidate would make this file slow).
# A run gives the command's verdict; how often that verdict is right is the command's figure.
MERGES = Path("/work/shared/data/memory-pairs-dev-2/merges.jsonl")
LABELS = ("faithful", "drops", "inverts", "swaps", "invents")


def _candidates() -> list:
    if not MERGES.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{MERGES} is not on this machine"))]
    items = [json.loads(line) for line in MERGES.read_text().splitlines() if line.strip()]
    return [
        pytest.param(item, id=item["id"])
        for label in LABELS
        for item in [i for i in items if i["label"] == label][:2]
    ]


@pytest.mark.parametrize("item", _candidates())
def test_a_consolidation_run_plans_a_faithful_summary_and_refuses_a_bad_one(
    world, model_stub, settings, item
):
    settings.BRAIN_CONSOLIDATION_SUMMARY_OVER = 1  # every original of the candidate in one summary
    originals = [
        remember(world.copilot, text, category="team_note", age_days=30 - n)
        for n, text in enumerate(item["originals"])
    ]
    model_stub.respond_with(lambda body: json.dumps({"text": item["candidate"]}))
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert model_stub.chat_requests(), "the model was asked"
    planned = plan.groups.filter(merged_text=item["candidate"]).exists()
    kept, why = claims_kept(item["originals"], item["candidate"])  # what `bench merges` says
    assert planned == kept, plan.model_note
    if not planned:
        # the reason: the claim the command names, or first a number or name no original has
        assert f"({why})" in plan.model_note or "names what no original says" in plan.model_note
        assert all(m.status == "active" for m in Memory.objects.filter(pk__in=[m.pk for m in originals]))
