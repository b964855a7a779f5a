"""What issue 52 asked of model jobs, against a real server (make test-models): the eval gate as
a background job holding a trusted write until its check, a server killed in the middle of a job
and started again, and a server whose context goes from 512 to 2,048 tokens. The assertions are
on outcomes — what was written, what was refused and why — never on wall time, so a slow machine
passes them."""

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest

from knowledge.models import Episode, Memory, ModelUsage

pytestmark = pytest.mark.real_model


def noted(job: str, summary: dict, **extra) -> dict:
    usage = list(ModelUsage.objects.order_by("pk"))
    summary[job] = {
        "calls": len(usage),
        "seconds": round(sum(u.latency_ms for u in usage) / 1000, 1),
        "outcomes": dict(Counter(u.outcome for u in usage)),
        **extra,
    }
    for u in usage:  # every call that did not end well says why
        assert u.outcome == ModelUsage.OK or u.error, (u.outcome, u.error)
    return summary[job]


def test_the_gate_holds_a_trusted_write_until_its_background_check(world, real_model, summary):
    from knowledge.llm.jobs import job_run
    from knowledge.models import ModelJob
    from knowledge.principals import services
    from memory.gate.datasets import dataset_create
    from memory.models import GateCheck
    from tests.factory import SYSTEM

    services.setting_set(actor=SYSTEM, name="BRAIN_MEMORY_ACTIVATION_GATE", value="enforce")
    cases = [
        {
            "id": "vpn",
            "input": "Which VPN client version fixes error E4012?",
            "expect": {"contains": ["5.2"]},
        },
        {"id": "hello", "input": "Say hello.", "expect": {"regex": ["(?i)hello|hi"]}},
    ]
    dataset_create(actor=SYSTEM, name="memory-gate", kind="agent_turn", cases=cases)
    response = world.client("scribe").post(
        "/api/memory",
        {"agent": "scribe", "scope": "shared", "text": "VPN error E4012 is fixed by client 5.2.1"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    memory = Memory.objects.get(pk=response.json()["id"])
    assert (memory.status, memory.queue_reason) == (Memory.QUEUED, "gate")
    assert not ModelUsage.objects.exists()  # the write asked the model nothing
    for job in ModelJob.objects.filter(kind="gate.check", state=ModelJob.QUEUED):
        job_run(job.pk)
    check = GateCheck.objects.get(memory=memory)
    memory.refresh_from_db()
    noted("eval gate (enforce)", summary, written=f"{check.verdict}: memory {memory.status}")
    if check.verdict == GateCheck.PASS:
        assert memory.status == Memory.ACTIVE
    elif check.verdict == GateCheck.PENDING:  # a slow server timed out: put off to the sweep, held
        assert check.reason.startswith("deferred: ") and check.deferrals == 1, check.reason
        assert (memory.status, memory.queue_reason) == (Memory.QUEUED, "gate")
    else:  # regressed or not checked: held (BRAIN_GATE_UNCHECKED is hold), saying why
        assert check.verdict in (GateCheck.REGRESSED, GateCheck.UNCHECKED), check.verdict
        assert memory.status == Memory.QUEUED and check.reason and memory.status_reason


def _kill_once_a_call_is_in_flight(server, sent: list, *, after: float = 0.5) -> threading.Thread:
    """Kill the server (as a crash would) once the next chat request is on its way."""
    seen = len(sent)

    def watch():
        for _ in range(6000):
            if len(sent) > seen:
                time.sleep(after)  # the request has reached it: it is reading the prompt
                server.stop(kill=True)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_server_restarted_mid_job_and_resized_from_512_to_2048(
    world, real_model, own_server, settings, summary
):
    from curation.dreaming.stage_a.services import stage_a_run
    from curation.models import DreamingRun
    from knowledge.llm import profile_resolve
    from knowledge.llm.profiles import CONTEXT_TTL
    from knowledge.llm.reach import endpoints_check
    from knowledge.models import ModelEndpointState
    from tests import factory
    from tests.deferred import deferred, run_deferred

    settings.BRAIN_MODEL_BASE_URL = own_server.url
    ids = factory.post_messages(
        world.general,
        [
            {"speaker": ["ana", "bob"][i % 2], "text": text}
            for i, text in enumerate(
                [
                    "The VPN drops every hour since this morning.",
                    "Which client version do you run?",
                    "5.1.8, and it shows error E4012.",
                    "Client 5.2.1 fixes E4012; upgrade from the portal.",
                    "Upgraded, it works now. Thanks!",
                    "Who books the room for the offsite?",
                    "Dana does; ask her by e-mail.",
                    "Done, room 4 on Friday.",
                ]
            )
        ],
    )
    seen: list[str] = []

    # 1. A server started with 512 tokens while Brain expects 2,048: the first request is
    #    refused with the server's size, which Brain keeps; nothing is written, the run says why.
    own_server.start(context=512)
    first = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL, max_seconds=600)
    seen.append(f"512: {first.state}")
    assert first.state in (DreamingRun.FAILED, DreamingRun.DONE), first.reason
    if first.state == DreamingRun.FAILED:
        assert first.reason and not Episode.objects.exists(), first.reason
    learned = profile_resolve("light").context_tokens
    seen.append(f"context learned: {learned}")
    assert learned == 512 or first.state == DreamingRun.DONE  # the server's refusal told its size

    # 2. Restarted with 2,048 tokens: once what Brain learned expires it asks the server again.
    own_server.stop()
    own_server.start(context=2048)
    assert endpoints_check()["light"] == "reachable"
    ModelEndpointState.objects.filter(context_learned_at__isnull=False).update(
        context_learned_at=time_ago(CONTEXT_TTL + timedelta(minutes=1))
    )
    assert profile_resolve("light").context_tokens == 2048

    # 3. Killed while a call is in flight: the run is deferred (nothing of that batch written,
    #    no failure counted), and after the restart the deferred run goes on by itself.
    from curation.models import StageACursor
    from knowledge.models import Message

    Message.objects.filter(pk__in=ids).update(episode=None)  # whatever step 1 wrote is unread again
    Episode.objects.all().delete()
    StageACursor.objects.filter(channel=world.general).update(
        message_ts=None, message_id=None, seen_id=0, failures=0, retry_at=None
    )
    watcher = _kill_once_a_call_is_in_flight(own_server, real_model)
    killed = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL, max_seconds=600)
    watcher.join(timeout=60)
    seen.append(f"killed: {killed.state}")
    assert killed.state == DreamingRun.DEFERRED, killed.reason
    assert killed.reason.startswith("deferred: failing:"), killed.reason
    assert not Episode.objects.exists()
    cursor = StageACursor.objects.get(channel=world.general)
    assert (cursor.failures, cursor.message_id) == (0, None)

    own_server.start(context=2048)
    (again,) = deferred("curation.dreaming.tasks.stage_a_channel")
    run_deferred(again)
    resumed = DreamingRun.objects.order_by("-pk").first()
    seen.append(f"resumed: {resumed.state}")
    assert resumed.pk != killed.pk and resumed.state in (DreamingRun.DONE, DreamingRun.FAILED), resumed.reason
    if resumed.state == DreamingRun.DONE:
        covered = set(Episode.objects.values_list("messages", flat=True))
        assert covered <= set(ids)
    else:  # the model's reply was refused: it says why and wrote nothing
        assert resumed.reason and not Episode.objects.exists()
    noted(
        "server restart and context change (stage A)",
        summary,
        written="; ".join(seen),
        why=[r for r in DreamingRun.objects.order_by("pk").values_list("reason", flat=True) if r][:4],
    )


def time_ago(delta):
    from django.utils import timezone

    return timezone.now() - delta
