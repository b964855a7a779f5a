"""The history section of context compilation: the last turns verbatim, a rolling summary of the
earlier ones kept incrementally per conversation (model when available, extractive otherwise),
within the budget."""

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.history.summary import extractive_fold
from memory.models import ConversationSummary
from tests import factory

pytestmark = pytest.mark.django_db
T0 = timezone.now() - datetime.timedelta(hours=2)
SPEAKERS = ["ana", "copilot"]


def _post(channel, n, start=0, thread=""):
    rows = [
        {
            "speaker": SPEAKERS[i % 2],
            "text": f"Turn {i} is about the billing export number {i}. More detail follows here.",
            "ts": T0 + datetime.timedelta(minutes=i),
            "thread": thread,
        }
        for i in range(start, start + n)
    ]
    return factory.post_messages(channel, rows)


def _context(world, conversation, **body):
    response = world.client("copilot").post(
        "/api/agents/copilot/context",
        {"conversation": conversation.pk, "q": "billing export", **body},
        format="json",
    )
    assert response.status_code == 200, response.content
    data = response.json()
    sections = {s["name"]: s for s in data["sections"]}
    return data, sections


def test_the_last_turns_come_verbatim_after_a_summary_of_the_earlier_ones(world):
    conversation = factory.make_conversation(world.copilot, world.general)
    ids = _post(world.general, 10)
    data, sections = _context(world, conversation)
    assert [s["name"] for s in data["sections"]] == [
        "instructions",
        "pinned_memo",
        "skills",
        "history",
        "recalled_memory",
    ]
    history = sections["history"]
    assert [t["id"] for t in history["turns"]] == ids[-4:]
    assert "Turn 9 is about the billing export number 9. More detail follows here." in history["text"]
    summary = history["summary"]
    assert summary["turns"] == 6 and summary["through_message"] == ids[5]
    assert summary["method"] == "extractive" and summary["note"]  # no model configured, and why
    assert summary["text"].splitlines()[0] == "ana: Turn 0 is about the billing export number 0."
    assert history["text"].index("Turn 5") < history["text"].index("Turn 6")
    # recalled memory does not repeat a turn the history shows
    recalled = {i["id"] for i in sections["recalled_memory"]["items"] if i["kind"] == "message"}
    assert not recalled & set(ids[-4:])
    assert data["total_tokens"] <= data["budget_tokens"]


def test_the_summary_is_advanced_from_its_stored_state_not_recomputed(world):
    conversation = factory.make_conversation(world.copilot, world.general)
    ids = _post(world.general, 8)
    _context(world, conversation)
    row = ConversationSummary.objects.get(conversation=conversation)
    assert (row.turns, row.through_message) == (4, ids[3])
    row.text = "MARKER kept from the stored summary"
    row.save()

    ids += _post(world.general, 3, start=8)
    _, sections = _context(world, conversation)
    row.refresh_from_db()
    assert (row.turns, row.through_message) == (7, ids[6])
    lines = row.text.splitlines()
    assert lines[0] == "MARKER kept from the stored summary"
    assert [line.split(":")[0] for line in lines[1:]] == ["ana", "copilot", "ana"]  # turns 4, 5, 6 only
    assert "Turn 4 " in lines[1] and "Turn 6 " in lines[3]
    assert [t["id"] for t in sections["history"]["turns"]] == ids[-4:]


def test_a_compilation_with_no_new_earlier_turns_writes_nothing(world):
    conversation = factory.make_conversation(world.copilot, world.general)
    _post(world.general, 6)
    _context(world, conversation)
    stamp = ConversationSummary.objects.get(conversation=conversation).updated_at
    with CaptureQueriesContext(connection) as queries:
        _context(world, conversation)
    assert not [
        q
        for q in queries.captured_queries
        if "memory_conversationsummary" in q["sql"]
        and q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT"))
    ]
    assert ConversationSummary.objects.get(conversation=conversation).updated_at == stamp


def test_history_keeps_within_the_budget_newest_turn_first(world):
    conversation = factory.make_conversation(world.copilot, world.general)
    ids = _post(world.general, 12)
    for budget in (30, 60, 120, 400):
        data, sections = _context(world, conversation, budget_tokens=budget)
        assert data["total_tokens"] <= budget
        turns = [t["id"] for t in sections["history"]["turns"]]
        if turns:
            assert turns[-1] == ids[-1] and turns == ids[-len(turns) :]
    _, small = _context(world, conversation, budget_tokens=60)
    _, large = _context(world, conversation, budget_tokens=4000)
    assert len(small["history"]["turns"]) < len(large["history"]["turns"]) == 4


def test_history_is_the_conversations_own_thread_and_can_be_turned_off(world):
    conversation = factory.make_conversation(world.copilot, world.general, thread="t1")
    own = _post(world.general, 3, thread="t1")
    _post(world.general, 3, start=3)  # the channel's main line, another thread
    _, sections = _context(world, conversation)
    assert [t["id"] for t in sections["history"]["turns"]] == own
    data, sections = _context(world, conversation, history_turns=0)
    assert "history" not in sections
    response = world.client("copilot").post(
        "/api/agents/copilot/context",
        {"conversation": conversation.pk, "q": "x", "history_turns": 51},
        format="json",
    )
    assert response.status_code == 400 and "history_turns" in response.json()["fields"]


def test_a_channel_preview_has_no_history(world):
    factory.make_conversation(world.copilot, world.general)
    _post(world.general, 3)
    response = world.client("copilot").post(
        "/api/agents/copilot/context", {"channel": "general", "q": "billing"}, format="json"
    )
    history = {s["name"]: s for s in response.json()["sections"]}["history"]
    assert history["turns"] == [] and history["note"] and not ConversationSummary.objects.exists()


def _fold_in_background(sections, conversation):
    """What the worker does with the fold the compilation queued."""
    from memory.history.tasks import summary_fold

    return summary_fold(conversation.pk, sections["history"]["turns"][0]["id"])


def test_the_request_never_calls_the_model_it_queues_the_fold(world, model_stub):
    conversation = factory.make_conversation(world.copilot, world.general)
    _post(world.general, 6)
    model_stub.reply_delay(30, '{"summary": "too late"}')  # a model that would hold the request
    _, sections = _context(world, conversation)
    assert model_stub.chat_requests() == []  # the request did not wait on the model
    summary = sections["history"]["summary"]
    assert summary["method"] == "extractive" and "in the background" in summary["note"]
    assert summary["text"].startswith("ana: Turn 0") and "copilot: Turn 1" in summary["text"]
    assert not ConversationSummary.objects.exists()  # the extractive view is not stored


def test_the_model_summarises_in_the_background(world, model_stub):
    conversation = factory.make_conversation(world.copilot, world.general)
    _post(world.general, 6)
    model_stub.reply_json({"summary": "ana and copilot went over billing export numbers 0 and 1."})
    _, sections = _context(world, conversation)
    assert _fold_in_background(sections, conversation) == "folded: model"
    _, sections = _context(world, conversation)
    summary = sections["history"]["summary"]
    assert summary["method"] == "model" and summary["note"] == ""
    assert summary["text"] == "ana and copilot went over billing export numbers 0 and 1."
    prompt = model_stub.requests[-1]["json"]["messages"][-1]["content"]
    assert "Turn 0 is about" in prompt and "Turn 1 is about" in prompt and "Turn 2" not in prompt
    assert model_stub.schema_sent(model_stub.chat_requests()[-1])["required"] == ["summary"]

    _post(world.general, 1, start=6)
    model_stub.reply_json({"summary": "ana and copilot covered billing export numbers 0 to 2."})
    _, sections = _context(world, conversation)
    _fold_in_background(sections, conversation)
    prompt = model_stub.requests[-1]["json"]["messages"][-1]["content"]
    assert "went over billing export numbers 0 and 1" in prompt  # the stored summary is folded on
    assert "Turn 2 is about" in prompt and "Turn 0 is about" not in prompt
    assert ConversationSummary.objects.get(conversation=conversation).turns == 3


def test_an_invalid_or_failing_reply_falls_back_to_the_extractive_fold_and_says_why(world, model_stub):
    conversation = factory.make_conversation(world.copilot, world.general)
    _post(world.general, 6)
    model_stub.reply_json({"summary": "Someone talked about billing."})  # names neither speaker
    model_stub.reply_json({"summary": "Someone talked about billing."})  # nor does the repair
    _, sections = _context(world, conversation)
    _fold_in_background(sections, conversation)
    _, sections = _context(world, conversation)
    summary = sections["history"]["summary"]
    assert summary["method"] == "extractive" and "leaves out who spoke" in summary["note"]
    assert summary["text"].startswith("ana: Turn 0")

    _post(world.general, 1, start=6)
    model_stub.reply_json({"not_summary": "x"})
    model_stub.reply_json({"not_summary": "x"})
    _, sections = _context(world, conversation)
    _fold_in_background(sections, conversation)
    _, sections = _context(world, conversation)
    assert sections["history"]["summary"]["method"] == "extractive"
    assert "refused" in sections["history"]["summary"]["note"]

    _post(world.general, 1, start=7)
    model_stub.reply_error(401, "invalid api key")  # refused, not an outage (that defers: below)
    _, sections = _context(world, conversation)
    _fold_in_background(sections, conversation)
    _, sections = _context(world, conversation)
    summary = sections["history"]["summary"]
    assert summary["method"] == "extractive" and "failed" in summary["note"] and summary["turns"] == 4


def test_an_outage_defers_the_fold_which_folds_the_same_turns_when_the_server_answers(
    world, model_stub, settings, django_capture_on_commit_callbacks
):
    """Issue 52: a fold whose call the server does not answer stores nothing (no extractive
    summary in its place) and defers itself; while it waits, a compilation queues no second fold
    and stores nothing either; the deferral, the server still down by the background check,
    defers again without calling, and once it answers folds the same turns with the model."""
    from django_q.models import Task

    from knowledge.models import ModelUsage
    from tests.deferred import deferred, run_deferred, server_down

    settings.BRAIN_MODEL_MAX_RETRIES = 0
    conversation = factory.make_conversation(world.copilot, world.general)
    _post(world.general, 6)
    model_stub.reply_error(503, "loading model")
    _, sections = _context(world, conversation)
    boundary = sections["history"]["turns"][0]["id"]
    assert _fold_in_background(sections, conversation).startswith("deferred: failing: HTTP 503")
    assert not ConversationSummary.objects.exists()  # nothing written, not even extractively
    (waiting,) = deferred("memory.history.tasks.summary_fold")
    assert waiting.args == repr((conversation.pk, boundary))

    server_down()
    folds = Task.objects.filter(func="memory.history.tasks.summary_fold").count()
    with django_capture_on_commit_callbacks(execute=True):
        _, sections = _context(world, conversation)
    summary = sections["history"]["summary"]
    assert summary["method"] == "extractive" and "in the background" in summary["note"]  # shown only
    assert not ConversationSummary.objects.exists()
    # the deferral folds them: no second fold queued (tests run queued tasks inline)
    assert Task.objects.filter(func="memory.history.tasks.summary_fold").count() == folds
    calls = len(model_stub.chat_requests())
    assert run_deferred(waiting).startswith("deferred: unreachable")
    assert len(model_stub.chat_requests()) == calls and not ConversationSummary.objects.exists()
    (waiting,) = deferred("memory.history.tasks.summary_fold")
    assert waiting.kwargs == repr({"deferrals": 2})

    server_down(down=False)
    model_stub.reply_json({"summary": "ana and copilot went over billing export numbers 0 and 1."})
    assert run_deferred(waiting) == "folded: model"
    stored = ConversationSummary.objects.get(conversation=conversation)
    assert (stored.method, stored.turns, stored.note) == ("model", 2, "")
    assert stored.text == "ana and copilot went over billing export numbers 0 and 1."
    prompt = model_stub.requests[-1]["json"]["messages"][-1]["content"]
    assert "Turn 0 is about" in prompt and "Turn 1 is about" in prompt  # the same turns, all of them
    assert ModelUsage.objects.filter(purpose="history.summary", outcome="ok").count() == 1
    assert deferred("memory.history.tasks.summary_fold") == []


def test_with_the_endpoint_down_a_compilation_stores_no_extractive_fold(world, model_stub):
    """No model configured: the compilation folds extractively at once. The model server down is
    not that: the turns wait for the model (shown, not stored) and the fold is queued."""
    from tests.deferred import server_down

    conversation = factory.make_conversation(world.copilot, world.general)
    _post(world.general, 6)
    server_down()
    _, sections = _context(world, conversation)
    assert sections["history"]["summary"]["method"] == "extractive"
    assert not ConversationSummary.objects.exists()
    assert model_stub.chat_requests() == []


def test_a_summary_naming_someone_no_turn_names_is_refused(world, model_stub):
    conversation = factory.make_conversation(world.copilot, world.general)
    _post(world.general, 6)
    wrong = {"summary": "ana and copilot agreed with Marcus on 2024-03-09 to ship billing export number 0."}
    model_stub.reply_json(wrong)
    model_stub.reply_json(wrong)
    _, sections = _context(world, conversation)
    _fold_in_background(sections, conversation)
    stored = ConversationSummary.objects.get(conversation=conversation)
    assert stored.method == "extractive"
    assert "names what no original says" in stored.note and "marcus" in stored.note


def test_a_fold_that_drops_or_swaps_a_claim_of_a_turn_is_refused(world, model_stub):
    conversation = factory.make_conversation(world.copilot, world.general)
    said = [
        "VPN client 5.2.1 fixes error E4012 on laptops.",
        "VPN client 5.1.8 still shows error E4012 after sleep.",
        "Thanks, good to know!",
        *(f"Turn {i} is about the billing export number {i}." for i in range(3, 7)),
    ]
    rows = [
        {"speaker": SPEAKERS[i % 2], "text": t, "ts": T0 + datetime.timedelta(minutes=i), "thread": ""}
        for i, t in enumerate(said)
    ]
    factory.post_messages(world.general, rows)
    dropped = {"summary": "ana said VPN client 5.2.1 fixes error E4012 on laptops; copilot agreed."}
    model_stub.reply_json(dropped)
    model_stub.reply_json(dropped)
    _, sections = _context(world, conversation)
    _fold_in_background(sections, conversation)
    stored = ConversationSummary.objects.get(conversation=conversation)
    assert stored.method == "extractive" and "5.1.8" in stored.text  # the turns' own lines
    assert "does not keep every claim" in stored.note and "drops: 5.1.8" in stored.note, stored.note

    stored.delete()
    swapped = {
        "summary": "ana: VPN client 5.1.8 fixes error E4012 on laptops; copilot: 5.2.1 still shows it after sleep."
    }
    model_stub.reply_json(swapped)
    model_stub.reply_json(swapped)
    _fold_in_background(sections, conversation)
    stored = ConversationSummary.objects.get(conversation=conversation)
    assert stored.method == "extractive" and "swaps" in stored.note, stored.note

    # every claim kept, the thanks left out: stored as the model wrote it
    stored.delete()
    kept = {
        "summary": "ana: VPN client 5.2.1 fixes error E4012 on laptops; copilot: client 5.1.8 still "
        "shows error E4012 after sleep."
    }
    model_stub.reply_json(kept)
    _fold_in_background(sections, conversation)
    stored = ConversationSummary.objects.get(conversation=conversation)
    assert (stored.method, stored.text) == ("model", kept["summary"]), stored.note


def test_the_extractive_fold_rolls_keeping_the_opening_line():
    turns = [(SPEAKERS[i % 2], f"Point {i} about the rollout plan. Extra words here.") for i in range(40)]
    text = extractive_fold("", turns, limit=60)
    lines = text.splitlines()
    assert lines[0] == "ana: Point 0 about the rollout plan."
    assert lines[1].startswith("(… ") and lines[-1] == "copilot: Point 39 about the rollout plan."
    dropped = int(lines[1].split()[1])
    assert dropped + len(lines) - 1 == 40  # every turn is a line or counted as left out
    again = extractive_fold(text, [("ana", "Point 40 now.")], limit=60)
    assert again.splitlines()[-1] == "ana: Point 40 now." and int(again.splitlines()[1].split()[1]) >= dropped
