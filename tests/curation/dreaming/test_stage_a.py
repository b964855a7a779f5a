"""Dreaming stage A through the real model client against the loopback model server: scripted
replies for a good batch, an unfinished topic, noise, invalid output, a foreign id, a timeout,
a database error at commit and two workers racing for one channel."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from curation.dreaming.stage_a import rules as stage_a
from curation.dreaming.stage_a.selectors import batch_next, stage_a_due, stage_a_status
from curation.dreaming.stage_a.services import ChannelBusy, stage_a_run
from curation.dreaming.tasks import stage_a_sweep
from curation.models import DreamingRun, StageACursor
from knowledge.models import AuditEvent, Episode, Message, ModelUsage
from tests import factory

NOW = timezone.now().replace(microsecond=0)
CHAT = [
    ("alice", "morning all!", ""),
    ("alice", "The VPN client shows error E4012 since the update", ""),
    ("bob", "Delete the old profile and re-import it from the portal", ""),
    ("alice", "That fixed it, thanks", ""),
    ("carol", "Who books the room for the offsite?", "offsite"),
    ("bob", "Dana does, ask her", "offsite"),
]


def post(channel, rows, *, start=None, prefix="m"):
    start = start or NOW - timedelta(hours=3)
    return factory.post_messages(
        channel,
        [
            {
                "speaker": s,
                "text": t,
                "thread": th,
                "ts": start + timedelta(minutes=i),
                "external_id": f"{prefix}{i}",
            }
            for i, (s, t, th) in enumerate(rows)
        ],
    )


def episode(
    ids, evidence=(), *, topic="VPN error E4012", resolution="Re-import the profile.", systems=("VPN",)
):
    return {
        "topic": topic,
        "summary": f"{topic}: discussed and settled.",
        "likely_question": f"What about {topic}?",
        "resolution": resolution,
        "systems": list(systems),
        "messages": list(ids),
        "evidence": list(evidence),
    }


def good_reply(ids):
    return {
        "episodes": [
            episode(ids[1:4], [ids[2]]),
            episode(
                ids[4:6], [ids[5]], topic="Offsite room booking", resolution="Dana books it.", systems=()
            ),
        ],
        "noise": [ids[0]],
        "leave_from": None,
    }


def nothing_written(channel):
    cursor = StageACursor.objects.filter(channel=channel).first()
    return (
        Episode.objects.count() == 0
        and not Message.objects.filter(episode__isnull=False).exists()
        and not AuditEvent.objects.filter(action="dreaming.episodes_written").exists()
        and (cursor is None or cursor.message_id is None)
    )


def test_a_good_batch_becomes_episodes_with_their_messages_cursor_and_audit(world, model_stub):
    ids = post(world.general, CHAT)
    model_stub.reply_json(good_reply(ids))
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    assert (run.state, run.reason) == (DreamingRun.DONE, "")
    assert (run.batches, run.model_calls, run.episodes, run.messages, run.noise, run.left) == (
        1,
        1,
        2,
        5,
        1,
        0,
    )
    vpn, offsite = Episode.objects.order_by("id")
    assert list(vpn.messages.order_by("id").values_list("id", flat=True)) == ids[1:4]
    assert list(vpn.evidence.values_list("id", flat=True)) == [ids[2]]
    assert (vpn.store, vpn.thread, vpn.dreaming_run, vpn.related_systems) == ("shared", "", run.pk, ["VPN"])
    assert (vpn.start_ts, vpn.end_ts) == (
        NOW - timedelta(hours=3, minutes=-1),
        NOW - timedelta(hours=3, minutes=-3),
    )
    assert offsite.thread == "offsite" and offsite.resolution == "Dana books it."
    assert Message.objects.get(pk=ids[0]).episode is None  # noise
    cursor = StageACursor.objects.get(channel=world.general)
    assert (cursor.message_id, cursor.failures, cursor.claimed_at, cursor.last_run_id) == (
        ids[-1],
        0,
        None,
        run.pk,
    )
    event = AuditEvent.objects.get(action="dreaming.episodes_written")
    assert event.dreaming_run == run.pk
    assert event.object_ids == [str(vpn.pk), str(offsite.pk)]
    assert event.counts == {"messages": 5, "noise": 1, "left": 0, "episodes": 2}
    assert event.data["job"] == stage_a.VERSION and "E4012" not in str(event.data)
    (request,) = model_stub.chat_requests()
    assert request["model"] == "stub-light"
    assert f"#{ids[1]} " in model_stub.prompt(request) and "E4012" in model_stub.prompt(request)
    usage = ModelUsage.objects.get()
    assert (usage.purpose, usage.outcome, usage.actor) == ("dreaming.stage_a", "ok", "system:dreaming")
    assert run.usage_ids == [usage.pk]
    # The Audit tab filters by the run.
    assert (
        world.client("admin").get(f"/api/audit?dreaming_run={run.pk}").json()["results"][0]["id"] == event.pk
    )
    # Caught up: another run reads nothing and calls no model.
    again = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    assert (again.state, again.batches) == (DreamingRun.DONE, 0) and len(model_stub.chat_requests()) == 1


def test_an_unfinished_topic_is_left_for_the_next_batch(world, model_stub):
    ids = post(world.general, CHAT[:4])
    model_stub.reply_json({"episodes": [], "noise": [ids[0]], "leave_from": ids[1]})
    run = stage_a_run(channel=world.general, trigger=DreamingRun.QUIET)
    assert (run.state, run.noise, run.left, run.episodes) == (DreamingRun.DONE, 1, 3, 0)
    cursor = StageACursor.objects.get(channel=world.general)
    assert cursor.message_id == ids[0]  # stops before the unfinished topic's first message
    assert not Message.objects.filter(pk__in=ids[1:], episode__isnull=False).exists()
    # The leftover is not read again every minute: only once something new arrives.
    assert stage_a_due(NOW + timedelta(days=1)) == []
    more = post(world.general, CHAT[4:], start=NOW - timedelta(hours=2), prefix="n")
    factory_age(ids + more, minutes=45)
    assert stage_a_due() == [(world.general.pk, DreamingRun.QUIET)]
    model_stub.reply_json(
        {
            "episodes": [episode(ids[1:4], [ids[2]]), episode(more, [more[1]], topic="room", systems=())],
            "noise": [],
        }
    )
    stage_a_run(channel=world.general, trigger=DreamingRun.QUIET)
    second = model_stub.chat_requests()[1]
    assert f"#{ids[0]} " not in model_stub.prompt(second) and f"#{ids[1]} " in model_stub.prompt(second)
    assert StageACursor.objects.get(channel=world.general).message_id == more[-1]
    assert Episode.objects.count() == 2


def factory_age(ids, *, minutes):
    """Make messages look as if they arrived `minutes` ago (the quiet trigger reads arrival)."""
    Message.objects.filter(pk__in=ids).update(created_at=timezone.now() - timedelta(minutes=minutes))


def test_noise_is_skipped_and_stays_searchable(world, model_stub):
    ids = post(world.general, [("alice", "hi", ""), ("bot", "build #41 passed", ""), ("bob", "lol", "")])
    model_stub.reply_json({"episodes": [], "noise": ids, "leave_from": None})
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    assert (run.state, run.noise, run.episodes) == (DreamingRun.DONE, 3, 0)
    assert StageACursor.objects.get(channel=world.general).message_id == ids[-1]
    assert Episode.objects.count() == 0
    assert list(Message.objects.filter(pk__in=ids).values_list("text", flat=True)) == [
        "hi",
        "build #41 passed",
        "lol",
    ]
    conv = factory.make_conversation(world.copilot, world.general)
    result = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conv.pk, "q": "build passed"},
        format="json",
    )
    assert any(r["kind"] == "message" and r["id"] == ids[1] for r in result.json()["results"])


def assert_failed_and_nothing_written(world, run, reason_start):
    assert run.state == DreamingRun.FAILED
    assert run.reason.startswith(reason_start), run.reason
    assert nothing_written(world.general)
    cursor = StageACursor.objects.get(channel=world.general)
    assert cursor.failures == 1 and cursor.retry_at > timezone.now() and cursor.claimed_at is None


def test_invalid_json_writes_nothing_and_is_retried_with_back_off(world, model_stub):
    ids = post(world.general, CHAT)
    model_stub.reply_text("Here are the episodes: the VPN one and the offsite one.")
    model_stub.reply_text("The VPN one and the offsite one.")  # the one repair, refused too
    run = stage_a_run(channel=world.general, trigger=DreamingRun.QUIET)
    assert_failed_and_nothing_written(world, run, "invalid model output: output is not JSON")
    assert list(ModelUsage.objects.values_list("outcome", flat=True)) == ["invalid", "invalid"]
    assert "That reply was refused: output is not JSON" in model_stub.prompt(model_stub.chat_requests()[1])
    assert run.model_calls == 2
    cursor = StageACursor.objects.get(channel=world.general)
    assert stage_a_due(timezone.now()) == []  # backing off
    assert stage_a_due(cursor.retry_at + timedelta(seconds=1)) == [(world.general.pk, DreamingRun.RETRY)]
    # A second failure doubles the wait.
    StageACursor.objects.filter(pk=world.general.pk).update(retry_at=None)
    model_stub.reply_text("{")
    model_stub.reply_text("{")
    stage_a_run(channel=world.general, trigger=DreamingRun.RETRY)
    cursor.refresh_from_db()
    assert cursor.failures == 2
    assert timedelta(minutes=9) < cursor.retry_at - timezone.now() <= timedelta(minutes=10)
    # The retry that gets a good reply succeeds and resets the count.
    model_stub.reply_json(good_reply(ids))
    run = stage_a_run(channel=world.general, trigger=DreamingRun.RETRY)
    cursor.refresh_from_db()
    assert (run.state, cursor.failures, cursor.retry_at, cursor.message_id) == (
        DreamingRun.DONE,
        0,
        None,
        ids[-1],
    )


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda r, ids: r["episodes"][1]["messages"].append(ids[3]), "message"),  # overlap
        (lambda r, ids: r["noise"].clear(), "message"),  # a message nowhere
        (lambda r, ids: r["episodes"][0]["evidence"].append(ids[5]), "episode 1's evidence"),
        (lambda r, ids: r.update(leave_from=ids[4]), "episode 2 includes message"),
        (lambda r, ids: r["episodes"][0].update(evidence=[]), "episode 1 has a resolution"),
        (lambda r, ids: r["episodes"][0].pop("summary"), "output does not match the schema"),
    ],
)
def test_a_reply_breaking_a_rule_writes_nothing(world, model_stub, mutate, reason):
    ids = post(world.general, CHAT)
    reply = good_reply(ids)
    mutate(reply, ids)
    model_stub.reply_json(reply)
    run = stage_a_run(channel=world.general, trigger=DreamingRun.QUIET)
    assert_failed_and_nothing_written(world, run, "invalid model output")
    assert reason in run.reason


def test_a_cited_id_from_another_channel_writes_nothing(world, model_stub):
    ids = post(world.general, CHAT)
    (foreign,) = post(world.support, [("bob", "support only", "")], prefix="s")
    reply = good_reply(ids)
    reply["episodes"][0]["messages"].append(foreign)
    model_stub.reply_json(reply)
    run = stage_a_run(channel=world.general, trigger=DreamingRun.QUIET)
    assert_failed_and_nothing_written(world, run, "invalid model output")
    assert f"message {foreign}, which belongs to channel support" in run.reason
    assert Message.objects.get(pk=foreign).episode is None


def test_an_outage_defers_the_run_and_the_same_batch_is_read_when_the_server_answers(
    world, model_stub, settings
):
    """Issue 52: a timeout is the server's outage, not the batch's fault. The run is deferred —
    nothing written, no failure counted, the batch not halved — and comes back after a back-off;
    while the background check finds the server down it defers again without calling it, and
    once the server answers it reads the very same messages."""
    from tests.deferred import deferred, run_deferred, server_down

    settings.BRAIN_MODEL_TIMEOUT_SECONDS = 0.3
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    ids = post(world.general, CHAT)
    model_stub.reply_delay(1.5)
    run = stage_a_run(channel=world.general, trigger=DreamingRun.QUIET)
    assert run.state == DreamingRun.DEFERRED, run.reason
    assert run.reason.startswith("deferred: failing: no answer within 0.3 s"), run.reason
    assert ModelUsage.objects.get().outcome == "timeout"
    assert run.model_calls == 1 and run.usage_ids == [ModelUsage.objects.get().pk]
    assert nothing_written(world.general)
    cursor = StageACursor.objects.get(channel=world.general)
    assert (cursor.failures, cursor.retry_at, cursor.claimed_at) == (0, None, None)
    (again,) = deferred("curation.dreaming.tasks.stage_a_channel")
    assert again.next_run > timezone.now()
    # quiet long enough to be due, the background check still finding the server up: the sweep
    # leaves the channel to its deferral (not read twice, nor deferred twice)
    factory_age(ids, minutes=120)
    assert stage_a_due() == [] and stage_a_sweep() == 0
    assert len(deferred("curation.dreaming.tasks.stage_a_channel")) == 1

    server_down()
    calls = len(model_stub.chat_requests())
    assert "deferred" in run_deferred(again)
    assert len(model_stub.chat_requests()) == calls  # the check knew: not called
    (again,) = deferred("curation.dreaming.tasks.stage_a_channel")
    assert "'deferrals': 2" in again.kwargs

    server_down(down=False)
    model_stub.reply_json(good_reply(ids))
    assert run_deferred(again).startswith("run ")
    last = DreamingRun.objects.order_by("-pk").first()
    assert last.state == DreamingRun.DONE and last.messages + last.noise == len(ids)
    assert set(Message.objects.filter(episode__isnull=False).values_list("pk", flat=True)) == set(ids[1:])
    prompt = model_stub.prompt(model_stub.chat_requests()[-1])
    assert all(text in prompt for _, text, _ in CHAT)  # the same batch, whole
    assert not deferred("curation.dreaming.tasks.stage_a_channel")


def test_without_a_model_stage_a_does_not_run_and_status_says_why(world, client):
    post(world.general, CHAT)
    factory_age(Message.objects.values_list("pk", flat=True), minutes=120)
    assert stage_a_due() == [] and stage_a_sweep() == 0
    assert not DreamingRun.objects.exists()
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.SKIPPED
    assert run.reason.startswith("stage A did not run: the light model is not configured")
    assert nothing_written(world.general) and not ModelUsage.objects.exists()
    section = stage_a_status()
    assert not section["available"] and "not configured" in section["unavailable_reason"]
    assert [c["lag_messages"] for c in section["channels"] if c["channel"] == "general"] == [6]
    client.force_login(world.admin)
    page = client.get("/knowledge/status/").content.decode()
    assert "Stage A is not running:" in page and "not configured" in page
    status = world.client("admin").get("/api/status").json()
    assert status["dreaming_stage_a"]["unavailable_reason"] == section["unavailable_reason"]


def test_over_budget_stage_a_does_not_run(world, model_stub, settings):
    settings.BRAIN_MODEL_DAILY_CALLS = 0
    post(world.general, CHAT)
    factory_age(Message.objects.values_list("pk", flat=True), minutes=120)
    assert stage_a_due() == []
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.SKIPPED and "over budget" in run.reason
    assert model_stub.chat_requests() == []


def test_triggers_quiet_threshold_and_settings(world, model_stub, settings):
    ids = post(world.general, CHAT)
    assert stage_a_due() == []  # just arrived, below the threshold
    factory_age(ids, minutes=31)
    assert stage_a_due() == [(world.general.pk, DreamingRun.QUIET)]
    factory_age(ids, minutes=5)
    from knowledge.principals.services import setting_set

    setting_set(actor=factory.SYSTEM, name="BRAIN_DREAMING_BATCH_MESSAGES", value=6)
    assert stage_a_due() == [(world.general.pk, DreamingRun.THRESHOLD)]
    setting_set(actor=factory.SYSTEM, name="BRAIN_DREAMING_BATCH_MESSAGES", value=200)
    setting_set(actor=factory.SYSTEM, name="BRAIN_DREAMING_QUIET_MINUTES", value=4)
    assert stage_a_due() == [(world.general.pk, DreamingRun.QUIET)]
    # The sweep queues the run (tasks run inline in tests); the claim keeps it to one.
    model_stub.reply_json(good_reply(ids))
    assert stage_a_sweep() == 1
    assert DreamingRun.objects.get().trigger == DreamingRun.QUIET
    assert stage_a_due() == []


def test_a_long_backlog_becomes_several_batches_in_one_run(world, model_stub, settings):
    settings.BRAIN_DREAMING_BATCH_TOKENS = 40
    ids = post(world.general, CHAT)
    seen = []

    def cut_all(body):
        text = model_stub.prompt(body)
        batch = [int(w[1:]) for w in text.split() if w.startswith("#") and w[1:].isdigit()]
        seen.append(batch)
        return stage_a_json({"episodes": [episode(batch, [batch[0]])], "noise": []})

    model_stub.respond_with(cut_all)
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.DONE and run.batches == len(seen) > 1
    assert [i for batch in seen for i in batch] == ids  # each message read once, in order
    assert (
        Episode.objects.count()
        == run.batches
        == AuditEvent.objects.filter(action="dreaming.episodes_written").count()
    )


def stage_a_json(data):
    import json

    return json.dumps(data)


def test_a_batch_never_crosses_a_store_boundary(world):
    ids = post(world.general, CHAT[:3])
    Message.objects.filter(pk=ids[2]).update(store="channel:general")
    batch = batch_next(world.general, None)
    assert (batch.ids, batch.store, batch.full) == (ids[:2], "shared", True)


def test_a_full_batch_may_not_be_left_whole():
    with pytest.raises(stage_a.Invalid, match="whole batch"):
        stage_a.check({"episodes": [], "noise": [], "leave_from": 1}, batch_ids=[1, 2], full=True)
    cut = stage_a.check({"episodes": [], "noise": [], "leave_from": 1}, batch_ids=[1, 2], full=False)
    assert (cut.covered, cut.left) == ([], [1, 2])


def test_the_api_runs_one_channel_now_for_admins(world, model_stub):
    ids = post(world.general, CHAT)
    model_stub.reply_json(good_reply(ids))
    assert (
        world.client("reviewer")
        .post("/api/dreaming/stage-a/run", {"channel": "general"}, format="json")
        .status_code
        == 403
    )
    assert (
        world.client("copilot")
        .post("/api/dreaming/stage-a/run", {"channel": "general"}, format="json")
        .status_code
        == 403
    )
    bad = world.client("admin").post(
        "/api/dreaming/stage-a/run", {"channel": "general", "stage": "a"}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["fields"] == {"stage": ["Unknown field."]}
    assert (
        world.client("admin")
        .post("/api/dreaming/stage-a/run", {"channel": "nope"}, format="json")
        .status_code
        == 404
    )
    job = factory.queued_run(world.client("admin"), "/api/dreaming/stage-a/run", {"channel": "general"})
    assert job["state"] == "done", job
    runs = world.client("reviewer").get("/api/dreaming/runs?channel=general").json()
    body = next(r for r in runs if r["id"] == job["result"]["run"])
    assert (body["state"], body["trigger"], body["episodes"], body["started_by"]) == (
        "done",
        "manual",
        2,
        "person:adam",
    )
    runs = world.client("reviewer").get("/api/dreaming/runs?channel=general").json()
    assert [r["id"] for r in runs] == [body["id"]]
    # A channel another run holds answers 409 and starts nothing.
    StageACursor.objects.filter(pk=world.general.pk).update(claimed_at=timezone.now())
    busy = world.client("admin").post("/api/dreaming/stage-a/run", {"channel": "general"}, format="json")
    assert busy.status_code == 409 and "another stage A run" in busy.json()["error"]
    assert DreamingRun.objects.count() == 1


def test_status_lists_lag_last_run_failures_and_alerts(world, model_stub, client):
    post(world.general, CHAT)
    for _ in range(3):
        model_stub.reply_text("not json")
        StageACursor.objects.filter(pk=world.general.pk).update(retry_at=None)
        stage_a_run(channel=world.general, trigger=DreamingRun.RETRY)
    section = stage_a_status()
    (general,) = [c for c in section["channels"] if c["channel"] == "general"]
    assert (general["lag_messages"], general["failures"], general["last_run"]["state"]) == (6, 3, "failed")
    assert general["next"].startswith("retry after")
    client.force_login(world.admin)
    page = client.get("/knowledge/status/").content.decode()
    assert "Stage A failed 3 times in a row in channel general: invalid model output" in page
    assert "Run stage A now" in page


def test_a_stage_a_episode_is_recalled_and_expands_to_its_messages(world, model_stub):
    from memory.recall.seen import forget_stats

    conv = factory.make_conversation(world.copilot, world.general)
    ids = post(world.general, CHAT)
    reply = good_reply(ids)
    reply["episodes"][0].update(
        topic="Remote access outage after the client update",
        summary="Several people could not work from home: the remote access client refused to connect.",
        likely_question="Why can't people work from home?",
    )
    model_stub.reply_json(reply)
    stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    factory.embed_all()
    forget_stats()
    vpn = Episode.objects.order_by("id").first()
    assert vpn.embedding_model
    result = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conv.pk, "q": "why can't people work from home"},
        format="json",
    )
    top = result.json()["results"][0]
    assert (top["kind"], top["id"]) == ("episode", vpn.pk)
    assert [m["external_id"] for m in top["messages"]] == ["m1", "m2", "m3"]
    opened = world.client("copilot").get(f"/api/memory/browse/episode/{vpn.pk}").json()
    assert [m["id"] for m in opened["messages"]] == ids[1:4]
    # Episodes obey the channel's store like their messages: no conversation elsewhere sees it.
    dm = factory.make_conversation(world.copilot, world.support)
    other = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": dm.pk, "q": "why can't people work from home"},
        format="json",
    )
    assert not any(r["kind"] == "episode" for r in other.json()["results"])


def test_the_settings_page_changes_the_thresholds_audited(world, client):
    from knowledge.settings_store import setting_get

    client.force_login(world.admin)
    client.post("/settings/", {"name": "BRAIN_DREAMING_QUIET_MINUTES", "value": "45"})
    assert setting_get("BRAIN_DREAMING_QUIET_MINUTES") == 45
    event = AuditEvent.objects.get(action="settings.changed")
    assert event.data == {"from": 30, "to": 45}
    client.post("/settings/", {"name": "BRAIN_DREAMING_QUIET_MINUTES", "value": "0"})
    client.post("/settings/", {"name": "BRAIN_DREAMING_QUIET_MINUTES", "value": "soon"})
    assert setting_get("BRAIN_DREAMING_QUIET_MINUTES") == 45
    assert 'name="value" value="45"' in client.get("/settings/").content.decode()


# --- real transactions: a commit that fails, two workers at once -------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_database_error_at_commit_writes_nothing_and_the_cursor_stays(model_stub):
    world = make_world()
    ids = post(world["general"], CHAT)
    with connection.cursor() as cur:
        cur.execute(
            """CREATE FUNCTION brain_test_refuse() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN RAISE EXCEPTION 'injected failure at commit'; END $$;
               CREATE CONSTRAINT TRIGGER brain_test_refuse AFTER INSERT ON knowledge_episode
               DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION brain_test_refuse();"""
        )
    try:
        model_stub.reply_json(good_reply(ids))
        run = stage_a_run(channel=world["general"], trigger=DreamingRun.QUIET)
    finally:
        with connection.cursor() as cur:
            cur.execute(
                "DROP TRIGGER brain_test_refuse ON knowledge_episode; DROP FUNCTION brain_test_refuse();"
            )
    assert run.state == DreamingRun.FAILED
    assert (
        run.reason.startswith("database error, nothing written")
        and "injected failure at commit" in run.reason
    )
    assert nothing_written(world["general"])
    cursor = StageACursor.objects.get(channel=world["general"])
    assert (cursor.message_id, cursor.seen_id, cursor.failures, cursor.claimed_at) == (None, 0, 1, None)
    assert (run.batches, run.episodes) == (0, 0)


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_for_one_channel_make_one_run(model_stub):
    world = make_world()
    ids = post(world["general"], CHAT)
    gate = threading.Event()

    def slow(body):
        gate.wait(5)  # hold the first call until the second worker has tried
        return stage_a_json(good_reply(ids))

    model_stub.respond_with(slow)
    outcomes = []

    def worker():
        try:
            outcomes.append(stage_a_run(channel=world["general"], trigger=DreamingRun.THRESHOLD).state)
        except ChannelBusy:
            outcomes.append("busy")
            gate.set()
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    gate.set()
    assert sorted(outcomes) == ["busy", "done"]
    assert DreamingRun.objects.count() == 1
    assert len(model_stub.chat_requests()) == 1
    assert Episode.objects.count() == 2
    assert StageACursor.objects.get(channel=world["general"]).message_id == ids[-1]


def make_world():
    """What the transactional tests need (the `world` fixture lives in a rolled-back test)."""
    return {"general": factory.make_channel("general")}


def test_the_sweep_runs_every_minute_from_the_schedule_table():
    from django.utils.module_loading import import_string

    from curation.schedules import schedule_table

    rows = {func: minutes for _, func, minutes in schedule_table()}
    assert rows["curation.dreaming.tasks.stage_a_sweep"] == 1
    assert import_string("curation.dreaming.tasks.stage_a_sweep") is stage_a_sweep


def test_only_admins_run_stage_a_from_the_console(world, model_stub, client):
    ids = post(world.general, CHAT)
    client.force_login(world.reviewer)
    assert client.post("/knowledge/status/stage-a/general/run").status_code == 403
    assert "Run stage A now" not in client.get("/knowledge/status/").content.decode()
    client.force_login(world.admin)
    assert client.get("/knowledge/status/stage-a/general/run").status_code == 405
    model_stub.reply_json(good_reply(ids))
    response = client.post("/knowledge/status/stage-a/general/run")
    assert model_stub.chat_requests() == []  # queued, not run inside the request
    factory.run_queued_jobs()
    response = client.get(response["Location"])
    assert (
        "Stage A run" in response.content.decode()
        and "2 episode(s) over 5 message(s)" in response.content.decode()
    )
    assert DreamingRun.objects.get().started_by == "person:adam"


def test_a_channel_queued_by_several_sweeps_is_read_once(world, model_stub):
    from curation.dreaming.tasks import stage_a_channel

    ids = post(world.general, CHAT)
    factory_age(ids, minutes=40)
    model_stub.reply_json(good_reply(ids))
    assert stage_a_channel(world.general.pk, DreamingRun.QUIET).startswith("run ")
    assert stage_a_channel(world.general.pk, DreamingRun.QUIET) == "not due any more"
    assert DreamingRun.objects.count() == 1 and len(model_stub.chat_requests()) == 1


def test_a_dead_workers_claim_is_taken_over_and_its_run_marked_abandoned(world, model_stub):
    ids = post(world.general, CHAT)
    model_stub.reply_text("{")
    stage_a_run(channel=world.general, trigger=DreamingRun.QUIET)  # leaves a cursor row
    dead = DreamingRun.objects.create(
        stage=DreamingRun.STAGE_A, channel=world.general, trigger=DreamingRun.QUIET, started_at=timezone.now()
    )
    StageACursor.objects.filter(pk=world.general.pk).update(
        run=dead, claimed_at=timezone.now() - timedelta(minutes=5)
    )
    with pytest.raises(ChannelBusy):
        stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    StageACursor.objects.filter(pk=world.general.pk).update(claimed_at=timezone.now() - timedelta(minutes=16))
    model_stub.reply_json(good_reply(ids))
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.DONE and run.episodes == 2
    dead.refresh_from_db()
    assert dead.state == DreamingRun.FAILED and dead.reason.startswith("abandoned")


def test_the_stage_a_section_reads_a_fixed_number_of_queries(world, model_stub, client):
    from django.test.utils import CaptureQueriesContext

    client.force_login(world.admin)

    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/knowledge/status/").status_code == 200
        return len(captured.captured_queries)

    def channel_with_a_run(name):
        channel = factory.make_channel(name)
        ids = post(channel, CHAT, prefix=name)
        model_stub.reply_json(good_reply(ids))
        stage_a_run(channel=channel, trigger=DreamingRun.MANUAL)
        model_stub.reply_text("{")
        post(channel, CHAT[:1], start=NOW, prefix=f"{name}-late")
        stage_a_run(channel=channel, trigger=DreamingRun.MANUAL)  # a failure too

    channel_with_a_run("ops")
    queries()  # the first visit of a session stores its console preferences: not measured
    before = queries()
    for name in ("ops-2", "ops-3", "ops-4"):
        channel_with_a_run(name)
    assert queries() == before


def test_after_a_failure_the_retry_reads_a_smaller_batch(world, model_stub, settings):
    from knowledge.tokens import count_tokens

    ids = post(world.general, CHAT)
    tokens = [count_tokens(line) for line in batch_next(world.general, None, budget_tokens=10**6).lines]
    settings.BRAIN_DREAMING_BATCH_TOKENS = sum(tokens)  # the whole chat fits in one batch
    half = max(n for n in range(1, 7) if sum(tokens[:n]) <= sum(tokens) // 2)
    model_stub.reply_text('{"episodes": [')  # a reply cut off mid-way
    model_stub.reply_text('{"episodes": [')  # and its repair
    stage_a_run(channel=world.general, trigger=DreamingRun.QUIET)
    first = model_stub.chat_requests()[0]
    assert all(f"#{i} " in model_stub.prompt(first) for i in ids)
    assert first["max_tokens"] == 800 + 30 * len(ids)
    model_stub.reply_json({"episodes": [], "noise": ids[:half]})
    model_stub.reply_json({"episodes": [], "noise": ids[half:]})
    StageACursor.objects.filter(pk=world.general.pk).update(retry_at=None)
    run = stage_a_run(channel=world.general, trigger=DreamingRun.RETRY)
    _, _, second, third = model_stub.chat_requests()
    assert [i for i in ids if f"#{i} " in model_stub.prompt(second)] == ids[:half] != ids
    # Once a batch is written the channel moves again: the rest is read at full size.
    assert [i for i in ids if f"#{i} " in model_stub.prompt(third)] == ids[half:]
    assert (run.state, run.batches) == (DreamingRun.DONE, 2)
    cursor = StageACursor.objects.get(pk=world.general.pk)
    assert (cursor.message_id, cursor.failures) == (ids[-1], 0)
