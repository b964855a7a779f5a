"""Every model-backed job against what real servers need: its schema in the portable subset of
structured output, its prompt fitted to the profile's context (the stub refuses otherwise, as
vLLM does), and the code rules against the nonsense small models were seen to write."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from curation import distiller
from curation.dreaming.stage_a import rules as stage_a
from curation.dreaming.stage_a.services import stage_a_run
from curation.dreaming.stage_b import rules as stage_b
from curation.dreaming.stage_b.services import stage_b_run
from curation.materials import learn as material_learn
from curation.models import DistillerRun, DreamingRun, StageBCursor
from knowledge.llm import model_profile_save
from knowledge.llm.wire import portable, portable_problems
from knowledge.models import Conversation, Entry, Memory, ModelUsage
from memory.consolidation import model as consolidation_model
from memory.history import summary as history_summary
from memory.matching.rules import merge_breach, summary_breach
from memory.reconciler import arbiter, digest_prompt
from tests import factory
from tests.factory import SYSTEM

JOB_SCHEMAS = {
    "distiller": distiller.OUTPUT_SCHEMA,
    "stage A": stage_a.SCHEMA,
    "stage B scan": stage_b.SCAN_SCHEMA,
    "stage B propose": stage_b.PROPOSE_SCHEMA,
    "materials": material_learn.SCHEMA,
    "consolidation merge/summary": consolidation_model.TEXT_SCHEMA,
    "reconciler arbiter": arbiter.schema([3, 5]),
    "reconciler digest": digest_prompt.SCHEMA,
    "history summary": history_summary.SCHEMA,
}


@pytest.mark.parametrize("job", list(JOB_SCHEMAS))
def test_every_jobs_wire_schema_is_in_the_portable_subset(job):
    wire = portable(JOB_SCHEMAS[job])
    assert portable_problems(wire) == []
    text = str(wire)
    for bound in ("maxLength", "maxItems", "minLength", "pattern", "minimum", "maximum"):
        assert bound not in text, (job, bound)


def test_the_consolidation_arbiters_schema_is_portable_too():
    members = [3, 5]
    model = consolidation_model.ModelGate.__new__(consolidation_model.ModelGate)
    captured = {}

    def ask(**kwargs):
        captured.update(kwargs)
        return None

    model.ask = ask
    info = {i: {"created_at": timezone.now(), "confidence": 0.5, "text": "x", "value": None} for i in members}
    model.arbitrate(1, "k", members, info, {3: [], 5: []})
    assert portable_problems(portable(captured["schema"])) == []


# --- fitted to the context ------------------------------------------------------------------------

SMALL = 2500  # a small model's context window, for the stub and the profile alike


@pytest.fixture
def small_model(model_stub):
    model_profile_save(actor=SYSTEM, name="light", context_tokens=SMALL)
    model_stub.context_tokens = SMALL
    return model_stub


def _fits(stub):
    for request in stub.chat_requests():
        assert stub.prompt_tokens(request) + request["max_tokens"] <= SMALL
        assert stub.schema_sent(request) is not None


def test_stage_a_halves_its_batch_until_it_fits_and_is_never_refused(world, small_model, settings):
    settings.BRAIN_DREAMING_BATCH_TOKENS = 20000
    rows = [
        {"speaker": "ana", "text": f"Message {i} about the billing export and its numbers, in detail."}
        for i in range(120)
    ]
    ids = factory.post_messages(world.general, rows)

    def answer(body):
        seen = [i for i in ids if f"#{i} " in small_model.prompt(body)]
        return {"content": json.dumps({"episodes": [], "noise": seen, "leave_from": None})}

    small_model.respond_with(answer)
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL, max_seconds=600)
    assert run.state == DreamingRun.DONE, run.reason
    assert run.batches > 1 and run.noise == len(ids)
    _fits(small_model)


def test_a_cut_stage_a_reply_is_asked_again_over_half_the_batch(world, model_stub):
    from curation.dreaming.stage_a.selectors import batch_next
    from curation.dreaming.stage_a.services import _prompt, _reply_tokens
    from knowledge.llm import prompt_estimate

    ids = factory.post_messages(
        world.general, [{"speaker": "ana", "text": f"Note {i} on the VPN client."} for i in range(6)]
    )
    batch = batch_next(world.general, None)
    # A context with no room for a bigger reply: the repair must read less instead.
    tight = prompt_estimate(_prompt(world.general, batch)) + _reply_tokens(batch) + 50
    model_profile_save(actor=SYSTEM, name="light", context_tokens=tight)
    model_stub.reply_cut('{"episodes": [{"topic": "VPN", "summ')
    model_stub.respond_with(
        lambda body: json.dumps(
            {
                "episodes": [],
                "noise": [i for i in ids if f"#{i} " in model_stub.prompt(body)],
                "leave_from": None,
            }
        )
    )
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.DONE, run.reason
    first, second, *_ = model_stub.chat_requests()
    assert sum(f"#{i} " in model_stub.prompt(second) for i in ids) < len(ids)
    assert second["max_tokens"] <= first["max_tokens"]
    assert ModelUsage.objects.order_by("pk").first().outcome == ModelUsage.CUT
    assert run.noise == len(ids)  # the rest was read in the next batch


def test_a_cut_stage_a_reply_reads_less_even_with_room_for_a_bigger_budget(world, small_model):
    """Issue 52.6: a bigger budget may not finish in time (a looping small model ran 262 s into a
    4,000-token retry); the retry reads half the batch with the same budget."""
    ids = factory.post_messages(world.general, [{"speaker": "ana", "text": f"Note {i}."} for i in range(4)])
    small_model.reply_cut('{"episodes": [')
    small_model.respond_with(
        lambda body: json.dumps(
            {
                "episodes": [],
                "noise": [i for i in ids if f"#{i} " in small_model.prompt(body)],
                "leave_from": None,
            }
        )
    )
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.DONE, run.reason
    first, second, *_ = small_model.chat_requests()
    assert second["max_tokens"] == first["max_tokens"]
    assert sum(f"#{i} " in small_model.prompt(second) for i in ids) < len(ids)
    assert second["temperature"] > first["temperature"] == 0
    assert run.noise == len(ids)


def test_the_distiller_reads_the_newest_part_that_fits_with_its_times(world, small_model):
    conversation = factory.make_conversation(world.copilot, world.general)
    start = timezone.now() - timedelta(hours=3)
    rows = [
        {
            "speaker": "ana",
            "text": f"Line {i}: the quarterly billing export is late again, see ticket.",
            "ts": start + timedelta(minutes=i),
        }
        for i in range(150)
    ]
    factory.post_messages(world.general, rows)
    Conversation.objects.filter(pk=conversation.pk).update(
        status=Conversation.FINISHED, started_at=start - timedelta(minutes=1), finished_at=timezone.now()
    )
    small_model.reply_json(
        {
            "memories": [
                {"text": "Ana reports the quarterly billing export is late.", "category": "workspace_note"}
            ]
        }
    )
    run = distiller.distill_conversation(conversation.pk)
    assert run.state == DistillerRun.DONE, run.reason
    assert "read the newest" in run.reason
    prompt = small_model.prompt(small_model.chat_requests()[0])
    assert "Line 149" in prompt and "Line 0:" not in prompt
    assert f"[{rows[149]['ts']:%Y-%m-%d %H:%M}] ana:" in prompt  # message times reach the model
    _fits(small_model)


def test_the_distiller_refuses_the_prompts_placeholder(world, model_stub):
    conversation = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(world.general, [{"speaker": "ana", "text": "I prefer e-mail."}])
    Conversation.objects.filter(pk=conversation.pk).update(
        status=Conversation.FINISHED, finished_at=timezone.now()
    )
    model_stub.reply_json({"memories": [{"text": "...", "category": "preference"}]})
    model_stub.reply_json({"memories": [{"text": "<the memory>", "category": "preference"}]})
    run = distiller.distill_conversation(conversation.pk)
    assert run.state == DistillerRun.FAILED and "the prompt's example text" in run.reason
    assert not Memory.objects.filter(author_kind="distiller").exists()


# --- stage B's scan opens only what it was shown ----------------------------------------------------


def test_a_scan_copying_the_example_ids_fails_the_run_and_consumes_nothing(world, model_stub):
    factory.make_conversation(world.copilot, world.general)
    (mid,) = factory.post_messages(world.general, [{"speaker": "alice", "text": "Dana works for Acme."}])
    from tests.curation.dreaming.test_stage_b import stage_a_episode

    episode = stage_a_episode(model_stub, world.general, mid, "Dana's employer")
    unknown = episode.pk + 1000
    model_stub.reply_json({"episodes": [unknown], "outcomes": [], "entries": [4000]})
    model_stub.reply_json({"episodes": [unknown], "outcomes": [], "entries": [4000]})
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.FAILED and "was not shown" in run.reason, run.reason
    assert "That reply was refused" in model_stub.prompt(model_stub.chat_requests()[-1])
    cursor = StageBCursor.objects.get(agent=world.copilot)
    assert cursor.episode_id == 0 and cursor.outcome_id == 0  # nothing consumed
    assert not Entry.objects.exists()


# --- merges and summaries: the replies seen from small models ---------------------------------------

ORIGINALS = [
    "The nightly backup of the billing database runs at 02:00 UTC and keeps 14 days.",
    "Billing database backups run nightly at 02:00 UTC; 14 days are kept.",
    "Every night at 02:00 UTC the billing DB is backed up, with 14 days of retention.",
]


def test_a_merge_of_garbage_is_refused():
    reply = "2023-17-07 7:59:48.643+CALCARRE_SANTAYADORA_DE_LA_CRUZ"
    why = merge_breach(reply, ORIGINALS)
    assert "names what no original says" in why and "2023-17-07" in why


def test_a_merge_that_is_the_prompts_placeholder_is_refused():
    assert "the prompt's example" in merge_breach(
        "The merged statement", ORIGINALS, examples=consolidation_model.EXAMPLES
    )


def test_a_merge_that_drops_an_original_is_refused():
    why = merge_breach("The billing database is backed up.", ORIGINALS)
    assert why.startswith("it does not keep memory")


def test_a_faithful_merge_passes():
    merged = "The billing database is backed up nightly at 02:00 UTC and backups are kept for 14 days."
    assert merge_breach(merged, ORIGINALS) == ""


def test_a_summary_naming_the_wrong_person_with_an_invented_date_is_refused():
    sources = ["ana: the export failed twice this week", "copilot: I will rerun the export tonight"]
    why = summary_breach("Marcus reran the export on 2024-05-02.", sources)
    assert "marcus" in why and "2024-05-02" in why
    assert summary_breach("Ana said the export failed twice; copilot will rerun it tonight.", sources) == ""


def test_consolidation_refuses_a_garbage_merge_and_keeps_the_originals(world, model_stub):
    from memory.consolidation import consolidation_run
    from memory.models import ConsolidationPlan
    from tests.memory.consolidation.test_consolidation import remember

    remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    model_stub.reply_json({"text": "2023-17-07 7:59:48.643+CALCARRE_SANTAYADORA"})
    model_stub.reply_json({"text": "The merged statement"})
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert plan.state == ConsolidationPlan.EMPTY
    assert "the prompt's example" in plan.model_note
    assert "names what no original says" in model_stub.prompt(model_stub.chat_requests()[1])
    assert model_stub.schema_sent(model_stub.chat_requests()[0])["required"] == ["text"]


def test_a_distiller_retry_never_sends_the_failed_request_again(world, model_stub):
    from curation.distiller import distill_pending

    conversation = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(
        world.general, [{"speaker": "ana", "text": f"Point {i} about billing."} for i in range(8)]
    )
    Conversation.objects.filter(pk=conversation.pk).update(
        status=Conversation.FINISHED, finished_at=timezone.now()
    )
    model_stub.respond_with(lambda body: "not json")
    distiller.distill_conversation(conversation.pk)
    distill_pending()
    distill_pending()
    prompts = [json.dumps(r["messages"]) for r in model_stub.chat_requests()]
    assert DistillerRun.objects.get().attempts == 3
    assert len(prompts) == len(set(prompts)) == 6  # three attempts, each with its one repair
