from django.core.management import call_command

from memory.models import ConsolidationGroup, ConsolidationPlan


def test_seed_demo_brings_a_proposed_plan_even_without_a_model(db):
    call_command("seed_demo", verbosity=0)
    plan = ConsolidationPlan.objects.get()
    assert plan.state == "proposed"
    kinds = sorted(plan.groups.values_list("kind", flat=True))
    assert kinds == ["conflict", "duplicate", "duplicate"]  # near-duplicates wait for a model
    assert plan.groups.get(kind=ConsolidationGroup.DUPLICATE, store="shared").items.count() == 4
    assert "not configured" in plan.model_note
    call_command("seed_demo", verbosity=0)  # idempotent
    assert ConsolidationPlan.objects.count() == 1


def test_seed_demo_merges_the_near_duplicates_when_a_model_answers(db, model_stub):
    model_stub.respond_with(
        lambda body: (
            '{"text": "The floor 3 printer releases jobs only after a PaperCut badge tap at the device"}'
        )
    )
    call_command("seed_demo", verbosity=0)
    plan = ConsolidationPlan.objects.get()
    assert plan.groups.filter(kind=ConsolidationGroup.NEAR_DUPLICATE).count() == 1


def test_seed_demo_is_idempotent_and_shows_a_stale_memory(db):
    from knowledge.models import Agent, AuditEvent, Memory

    call_command("seed_demo", verbosity=0)
    counts = (Agent.objects.count(), Memory.objects.count(), AuditEvent.objects.count())
    call_command("seed_demo", verbosity=0)
    assert (Agent.objects.count(), Memory.objects.count(), AuditEvent.objects.count()) == counts
    assert (
        Memory.objects.filter(stale=True, stale_reason="re-check: its source ticket:INC-31 changed").count()
        == 1
    )


def test_seed_demo_brings_a_gate_dataset_for_the_copilot(db):
    from memory.models import EvalDataset

    call_command("seed_demo", verbosity=0)
    dataset = EvalDataset.objects.get(name="memory-gate-copilot")
    assert [c["id"] for c in dataset.cases] == ["vpn-fix", "printer-floor-3", "no-passwords"]


def test_seed_demo_brings_a_skill_with_experience(db):
    from knowledge.models import AgentSkill, Memory, TaskOutcome

    call_command("seed_demo", verbosity=0)
    call_command("seed_demo", verbosity=0)  # idempotent
    assert AgentSkill.objects.filter(skill__name="meeting-notes", enabled=True).count() == 2
    assert TaskOutcome.objects.count() == 2
    lessons = Memory.objects.filter(skill__name="meeting-notes", owner__name="scribe", status="active")
    assert lessons.count() == 2 and all(m.sources.filter(kind="task_outcome").exists() for m in lessons)


def test_seed_demo_makes_episodes_for_the_demo_channels_when_a_model_answers(
    db, model_stub, django_capture_on_commit_callbacks
):
    import json
    import re

    from curation.models import DreamingRun
    from knowledge.models import Episode, Message

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


def test_seed_demo_without_a_model_queues_no_stage_a(db, django_capture_on_commit_callbacks):
    from io import StringIO

    from curation.models import DreamingRun

    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_demo", stdout=out)
    assert "stage A not queued: the light model is not configured" in out.getvalue()
    assert not DreamingRun.objects.exists()
