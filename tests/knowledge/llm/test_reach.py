"""The background check of model endpoints: an endpoint that does not answer is `unreachable`
on Status and the Models page, and jobs defer with that reason instead of failing one by one;
the context a server advertises is kept. Distiller failures show on Status."""

import socket

from curation.dreaming.stage_a.services import stage_a_run
from curation.models import DistillerRun, DreamingRun
from knowledge.llm import model_availability, model_profile_save, profile_resolve
from knowledge.llm.reach import endpoints_check
from knowledge.models import ModelUsage
from tests import factory
from tests.factory import SYSTEM


def _closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/v1"


def test_a_profile_whose_endpoint_does_not_answer_is_unreachable(world, model_stub, client):
    model_profile_save(actor=SYSTEM, name="light", base_url=_closed_port_url())
    result = endpoints_check()
    assert result["default"] == "reachable"
    assert result["light"].startswith("unreachable: ConnectError")
    assert model_availability("light").startswith("unreachable: the endpoint did not answer")
    factory.post_messages(world.general, [{"speaker": "ana", "text": "The VPN is down."}])
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL)
    # deferred, not skipped: it runs again once the server answers (issue 52)
    assert run.state == DreamingRun.DEFERRED and "unreachable" in run.reason
    assert not ModelUsage.objects.exists()  # no call was tried
    client.force_login(world.reviewer)
    status = client.get("/knowledge/status/").content.decode()
    assert 'id="status-models"' in status and "unreachable" in status
    assert "does not answer" in status and "the light profile wait" in status  # an alert
    models = client.get("/models/").content.decode()
    assert '<span class="badge bad">unreachable</span>' in models
    api = world.client("reviewer").get("/api/status").json()
    light = next(p for p in api["models"]["profiles"] if p["name"] == "light")
    assert light["endpoint"] == "unreachable"
    # Once it answers again, the next check clears it.
    model_profile_save(actor=SYSTEM, name="light", base_url="")
    assert endpoints_check()["light"] == "reachable"
    assert model_availability("light") == ""


def test_the_context_a_server_advertises_is_kept(world, model_stub):
    model_stub.advertise_context = True
    model_stub.context_tokens = 4096
    endpoints_check()
    assert profile_resolve("light").context_tokens == 4096
    model_profile_save(actor=SYSTEM, name="light", context_tokens=2048)  # a setting wins
    assert profile_resolve("light").context_tokens == 2048


def test_distiller_failures_show_on_status(world, model_stub, client):
    from django.utils import timezone

    from curation.distiller import distill_conversation
    from knowledge.models import Conversation

    conversation = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(world.general, [{"speaker": "ana", "text": "I prefer e-mail."}])
    Conversation.objects.filter(pk=conversation.pk).update(
        status=Conversation.FINISHED, finished_at=timezone.now()
    )
    for _ in range(2):  # a reply that is not JSON, and its repair the same (a 5xx only defers)
        model_stub.reply_text("not json at all")
    run = distill_conversation(conversation.pk)
    assert run.state == DistillerRun.FAILED
    client.force_login(world.reviewer)
    status = client.get("/knowledge/status/").content.decode()
    assert "Distiller failures" in status and f"conversation {conversation.pk}" in status
    assert "The distiller failed on 1 conversation(s)" in status


def test_one_down_server_is_one_alert_with_the_right_words(world, model_stub, client):
    """Both profiles on one server that does not answer: one alert naming the server and both
    profiles, none calling it a budget or offering to set a model up."""
    down = _closed_port_url()
    for name in ("default", "light"):
        model_profile_save(actor=SYSTEM, name=name, base_url=down, model="m")
    endpoints_check()
    alerts = world.client("reviewer").get("/api/status").json()["alerts"]
    about = [a for a in alerts if "model" in a["text"].lower()]
    assert len(about) == 1, about
    assert down in about[0]["text"] and "default and light profiles" in about[0]["text"]
    texts = " ".join(a["text"] for a in alerts)
    assert "budget" not in texts and "Set up a model" not in str(alerts)
