from io import StringIO

from django.core.management import call_command

from curation.models import DreamingRun
from knowledge.models import (
    Agent,
    AgentSkill,
    AuditEvent,
    CurationGuide,
    Entry,
    EntryRelation,
    Memory,
    Message,
    PinnedMemo,
    TaskOutcome,
)
from memory.models import ConsolidationGroup, ConsolidationPlan, EvalDataset


def _counts():
    managers = (
        Agent.objects,
        Memory.objects,
        AuditEvent.objects,
        Entry.all_objects,
        EntryRelation.objects,
        Message.objects,
        ConsolidationPlan.objects,
        TaskOutcome.objects,
    )
    return {manager.model.__name__: manager.count() for manager in managers}


def test_seed_demo_without_a_model_brings_the_whole_demo_once(db, django_capture_on_commit_callbacks):
    """One run of the demo without a model, checked part by part, then a second run that adds
    nothing (each run takes seconds: the parts share them)."""
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_demo", stdout=out)
    assert "stage A not queued: the light model is not configured" in out.getvalue()
    assert not DreamingRun.objects.exists()

    # Memories in every state, tier and queue reason.
    # every state a memory can be in, but erased: the demo erases nothing (an admin's act)
    assert set(Memory.objects.values_list("status", flat=True)) == {
        s for s, _ in Memory.STATUSES if s != Memory.ERASED
    }
    reasons = set(Memory.objects.filter(status=Memory.QUEUED).values_list("queue_reason", flat=True))
    assert reasons == {"new", "requeued", "merge", "gate", "conflict"}
    assert Memory.objects.filter(pinned=True).exists()
    assert set(Memory.objects.values_list("tier", flat=True)) == {t for t, _ in Memory.TIERS}
    assert Memory.objects.filter(status=Memory.QUEUED, supersedes__isnull=False).exists()

    # Entries, relations, a corrected block, a deleted entry, a curation guide.
    assert Entry.objects.count() >= 25 and len(set(Entry.objects.values_list("type", flat=True))) >= 5
    assert EntryRelation.objects.count() >= 10
    corrected = Memory.objects.filter(entry__name="VPN client", version=2)
    assert corrected.count() == 2 and all(v.reason for m in corrected for v in m.versions.filter(version=2))
    assert Entry.all_objects.filter(deleted_at__isnull=False).count() == 1
    assert CurationGuide.objects.filter(owner__name="copilot").exists()

    # Conversations and the copilot's memo.
    assert Message.objects.count() >= 10
    assert Message.objects.filter(channel__name="vpn-support", text__contains="AUTH-7731").exists()
    assert PinnedMemo.objects.get(agent__name="copilot").version == 1

    # A proposed consolidation plan: the near-duplicates wait for a model.
    plan = ConsolidationPlan.objects.get()
    assert plan.state == "proposed"
    assert sorted(plan.groups.values_list("kind", flat=True)) == ["conflict", "duplicate", "duplicate"]
    assert plan.groups.get(kind=ConsolidationGroup.DUPLICATE, store="shared").items.count() == 4
    assert "not configured" in plan.model_note

    # The copilot's gate dataset; the scribe's skill with its experience.
    dataset = EvalDataset.objects.get(name="memory-gate-copilot")
    assert [c["id"] for c in dataset.cases] == ["vpn-fix", "printer-floor-3", "no-passwords"]
    assert AgentSkill.objects.filter(skill__name="meeting-notes", enabled=True).count() == 2
    assert TaskOutcome.objects.count() == 2
    lessons = Memory.objects.filter(skill__name="meeting-notes", owner__name="scribe", status="active")
    assert lessons.count() == 2 and all(m.sources.filter(kind="task_outcome").exists() for m in lessons)

    counts = _counts()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_demo", verbosity=0)
    assert _counts() == counts
    assert PinnedMemo.objects.get(agent__name="copilot").version == 1
    # The memory whose source ticket changed is stale, once.
    stale = Memory.objects.filter(stale=True, stale_reason="re-check: its source ticket:INC-31 changed")
    assert stale.count() == 1


def test_seed_demo_merges_the_near_duplicates_when_a_model_answers(db, model_stub):
    model_stub.respond_with(
        lambda body: (
            '{"text": "The floor 3 printer releases jobs only after a PaperCut badge tap at the device"}'
        )
    )
    call_command("seed_demo", verbosity=0)
    plan = ConsolidationPlan.objects.get()
    assert plan.groups.filter(kind=ConsolidationGroup.NEAR_DUPLICATE).count() == 1


def test_seed_demo_makes_episodes_for_the_demo_channels_when_a_model_answers(
    db, model_stub, django_capture_on_commit_callbacks
):
    import json
    import re

    from knowledge.models import Episode

    def one_episode_per_batch(body):
        text = "\n".join(m["content"] for m in body["messages"])
        if "index a chat channel" not in text:  # the consolidation merge of the demo
            return '{"text": "The floor 3 printer releases jobs only after a PaperCut badge tap"}'
        ids = [int(i) for i in re.findall(r"^#(\d+) ", text, re.M)]
        episode = {
            "topic": "demo",
            "summary": "what the channel discussed",
            "likely_question": "what happened?",
            "resolution": "",
            "systems": [],
            "messages": ids,
            "evidence": [],
        }
        return json.dumps({"episodes": [episode], "noise": []})

    model_stub.respond_with(one_episode_per_batch)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_demo", verbosity=0)
    runs = DreamingRun.objects.filter(stage="a")
    assert runs.count() == 3 and {r.state for r in runs} == {"done"}
    assert {r.started_by for r in runs} == {"system:seed_demo"}
    assert Episode.objects.count() == 3
    assert not Message.objects.filter(episode__isnull=True).exists()
