"""Status alerts for what cannot run without a model or failed in the gate, each with the page that
fixes it; and the 14-day charts, drawn from the demo workspace's own rows."""

import re

from django.core.management import call_command
from django.test import override_settings

from curation.status.trends import DAYS, trends
from knowledge.models import Memory, ModelUsage
from knowledge.principal import Principal
from memory.lifecycle.review import memory_approve, memory_reject
from memory.models import GateCheck
from tests import factory


def _points(html, name):
    figure = re.search(rf'<figure[^>]*id="chart-{name}".*?</figure>', html, re.S).group(0)
    return [int(v) for v in re.findall(r'class="point"[^>]*data-value="(\d+)"', figure)]


def test_no_model_is_an_alert_that_names_the_models_page_not_a_setting(client, world):
    client.force_login(world.reviewer)
    page = client.get("/knowledge/status/")
    html = page.content.decode()
    alert = next(a for a in page.context["alerts"] if a["text"].startswith("No model is set up"))
    assert alert["level"] == "error"
    assert "Dreaming (stages A and B)" in alert["text"] and "eval gate" in alert["text"]
    assert alert["fix"]["url"] == "/models/"
    assert 'href="/models/"' in html
    assert "BRAIN_" not in html  # a reviewer is told the page, never an environment variable
    assert "Nothing needs attention" not in html


def test_with_a_model_set_up_there_is_no_model_alert(client, world, model_stub):
    client.force_login(world.reviewer)
    alerts = client.get("/knowledge/status/").context["alerts"]
    assert not [a for a in alerts if "model" in a["text"].lower() and "fix" in a]


def test_gate_errors_are_an_alert_with_the_gate_page(client, world):
    memory = factory.make_memory(world.copilot, "A fact the gate could not check.")
    GateCheck.objects.create(
        memory=memory, memory_version=1, verdict=GateCheck.ERROR, trigger="shadow", reason="model timed out"
    )
    client.force_login(world.reviewer)
    alerts = client.get("/knowledge/status/").context["alerts"]
    gate = next(a for a in alerts if "eval-gate check" in a["text"])
    assert "1 eval-gate check could not run" in gate["text"] and "model timed out" in gate["text"]
    assert gate["fix"]["url"] == "/gate/"
    assert client.get("/api/status", HTTP_AUTHORIZATION=f"Bearer {world.tokens['reviewer']}").json()[
        "alerts"
    ]  # the API carries the same alerts, fix included


def test_the_charts_have_fourteen_points_each_drawn_from_the_demo_workspace(client, world):
    call_command("seed_demo", verbosity=0)
    queued = Memory.objects.filter(status=Memory.QUEUED).count()
    decided = {s.name: s for s in trends()}["decisions"].values[-1]  # the demo's own decisions
    reviewer = Principal.for_user(world.reviewer)
    first, second = Memory.objects.filter(status=Memory.QUEUED).order_by("id")[:2]
    memory_approve(actor=reviewer, memory_id=first.pk)
    memory_reject(actor=reviewer, memory_id=second.pk, reason="not a fact")
    ModelUsage.objects.create(
        created_at=first.created_at, profile="default", purpose="test", outcome="ok", total_tokens=120
    )
    client.force_login(world.reviewer)
    html = client.get("/knowledge/status/").content.decode()
    for name in ("queue", "decisions", "job_failures", "model_calls", "model_tokens", "embedding_backlog"):
        assert len(_points(html, name)) == DAYS, name
    assert _points(html, "queue")[-1] == queued - 2
    assert _points(html, "decisions")[-1] == decided + 2
    assert _points(html, "model_calls")[-1] == 1 and _points(html, "model_tokens")[-1] == 120
    # The refresh every 15 seconds redraws the charts with the panel.
    partial = client.get("/knowledge/status/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="status-panel")
    assert len(_points(partial.content.decode(), "queue")) == DAYS


def test_the_queue_line_counts_back_from_now(world):
    reviewer = Principal.for_user(world.reviewer)
    memories = [factory.make_queued_memory(world.copilot, f"Queued {i}") for i in range(3)]
    memory_approve(actor=reviewer, memory_id=memories[0].pk)
    series = {s.name: s for s in trends()}
    assert series["queue"].values[-1] == 2
    assert series["queue"].values[-2] == 0  # nothing was queued yesterday
    assert series["decisions"].values == [0] * (DAYS - 1) + [1]


@override_settings(BRAIN_EMBEDDINGS="none")
def test_without_embeddings_the_backlog_chart_is_flat(world):
    factory.make_memory(world.copilot, "No vector wanted.")
    series = {s.name: s for s in trends()}
    assert series["embedding_backlog"].values == [0] * DAYS
