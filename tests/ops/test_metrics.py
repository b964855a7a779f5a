"""GET /metrics: Prometheus text, behind BRAIN_METRICS_TOKEN; the names docs/METRICS.md lists;
one search moves the recall histograms and the request counter."""

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests import factory

TOKEN = "metrics-secret-1"


def scrape(client: Client) -> dict[str, dict]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    families = {}
    for family in text_string_to_metric_families(response.content.decode()):
        families[family.name] = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value for sample in family.samples
        }
    return families


def value(families, family, sample, **labels) -> float:
    return families.get(family, {}).get((sample, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def metrics_on(settings):
    settings.BRAIN_METRICS_TOKEN = TOKEN


def test_metrics_are_off_without_a_token_and_refuse_a_wrong_one(db, settings):
    settings.BRAIN_METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404
    settings.BRAIN_METRICS_TOKEN = TOKEN
    assert Client().get("/metrics").status_code == 401
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-secret-2")
    assert wrong.status_code == 401 and wrong.json()["error"] == "not_authenticated"


def test_one_search_moves_the_recall_histogram_and_the_request_counter(world, metrics_on):
    factory.make_memory(world.copilot, "The VPN drops after the client update; reinstall the profile.")
    factory.make_queued_memory(world.copilot, "Alice prefers tea.")
    conversation = factory.make_conversation(world.copilot, world.general)
    client = Client()
    before = scrape(client)
    response = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conversation.pk, "q": "vpn drops"},
        format="json",
    )
    assert response.status_code == 200 and response.json()["results"]
    after = scrape(client)

    step = "brain_recall_step_seconds"
    for name in ("total", "fusion", "packing", "keyword_knowledge"):
        moved = value(after, step, f"{step}_count", step=name) - value(
            before, step, f"{step}_count", step=name
        )
        assert moved == 1, name
    assert value(after, step, f"{step}_sum", step="total") > value(before, step, f"{step}_sum", step="total")

    http = "brain_http_requests"
    labels = {"route": "/api/memory/search", "method": "POST", "status": "200"}
    assert value(after, http, f"{http}_total", **labels) - value(before, http, f"{http}_total", **labels) == 1
    latency = "brain_http_request_duration_seconds"
    key = {"route": "/api/memory/search", "method": "POST"}
    assert (
        value(after, latency, f"{latency}_count", **key) - value(before, latency, f"{latency}_count", **key)
        == 1
    )

    # the gauges computed at scrape time
    assert value(after, "brain_database_up", "brain_database_up") == 1
    assert value(after, "brain_review_queue", "brain_review_queue") == 1
    assert ("brain_embedding_backlog", (("kind", "memories"),)) in after["brain_embedding_backlog"]
    for state in ("queued", "running", "stuck", "failed"):
        assert ("brain_jobs", (("state", state),)) in after["brain_jobs"]
    for name in (
        "brain_jobs_oldest_queued_seconds",
        "brain_dreaming_lag_messages",
        "brain_dreaming_lag_seconds",
        "brain_db_connections",
        "brain_model_calls",
        "brain_model_tokens",
    ):
        assert name in after, name
    assert value(after, "brain_db_connections", "brain_db_connections", state="max") > 0


def test_model_calls_and_tokens_are_counted_by_job_and_profile(world, metrics_on, model_stub):
    from knowledge.llm.client import model_call

    model_stub.reply_text("hello")
    model_call(actor=factory.SYSTEM, purpose="metrics_probe", messages=[{"role": "user", "content": "hi"}])
    after = scrape(Client())
    assert (
        value(
            after,
            "brain_model_calls",
            "brain_model_calls_total",
            job="metrics_probe",
            profile="default",
            outcome="ok",
        )
        == 1
    )
    assert (
        value(
            after,
            "brain_model_tokens",
            "brain_model_tokens_total",
            job="metrics_probe",
            profile="default",
            kind="prompt",
        )
        > 0
    )


def test_mcp_requests_are_counted_beside_django_ones(db, metrics_on):
    """/mcp/ is served by the MCP SDK's ASGI app, not Django: the same counter covers it."""
    import httpx

    from tests.mcp_helpers import AsgiServer

    server = AsgiServer()
    try:
        before = scrape(Client())
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        assert httpx.post(f"{server.url}/mcp/", json=body).status_code == 401
        after = scrape(Client())
    finally:
        server.close()
    http = "brain_http_requests"
    labels = {"route": "/mcp/", "method": "POST", "status": "401"}
    assert value(after, http, f"{http}_total", **labels) - value(before, http, f"{http}_total", **labels) == 1


def test_an_asgi_response_is_counted_before_its_client_has_it():
    """The count is taken when the last body message goes out, not after the app returns (the
    client may scrape in between: a response it holds is always counted)."""
    import asyncio
    import threading

    from brainsite.ops.metrics import asgi_observed
    from knowledge.metrics import http_requests

    def counted() -> float:
        return http_requests.labels("/test-asgi/", "POST", "401")._value.get()

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"no", "more_body": False})
        await asyncio.sleep(0)  # the app's own cleanup, after the client has the response

    seen = []

    async def send(message):
        if message["type"] == "http.response.body":
            seen.append(counted())

    before = counted()
    call = asgi_observed(app, "/test-asgi/")({"type": "http", "method": "POST"}, None, send)
    # in a thread of its own: the browser tests' Playwright keeps an event loop in this one
    thread = threading.Thread(target=asyncio.run, args=(call,))
    thread.start()
    thread.join()
    assert seen == [before + 1] and counted() == before + 1


def test_finished_jobs_are_counted_by_function_and_outcome(db, metrics_on):
    """The worker connects this receiver to django-q2's post_execute (brainsite.ops.worker);
    here tasks run inline (the test settings' sync cluster), through the same monitor code."""
    from django.utils import timezone
    from django_q.signals import post_execute
    from django_q.tasks import async_task

    post_execute.connect(job_observed_for_test, dispatch_uid="test-job-metrics")
    try:
        before = scrape(Client())
        async_task("knowledge.tasks.term_stats_compact")
        # A failure as the monitor reports it (inline, the sync cluster re-raises it instead).
        now = timezone.now()
        job_observed_for_test(
            "django_q",
            task={"func": "knowledge.tasks.no_such_job", "success": False, "started": now, "stopped": now},
        )
        after = scrape(Client())
    finally:
        post_execute.disconnect(dispatch_uid="test-job-metrics")
    runs = "brain_jobs_run"
    ok = {"func": "knowledge.tasks.term_stats_compact", "outcome": "ok"}
    failed = {"func": "knowledge.tasks.no_such_job", "outcome": "failed"}
    assert value(after, runs, f"{runs}_total", **ok) - value(before, runs, f"{runs}_total", **ok) == 1
    assert value(after, runs, f"{runs}_total", **failed) - value(before, runs, f"{runs}_total", **failed) == 1
    duration = "brain_job_duration_seconds"
    key = {"func": "knowledge.tasks.term_stats_compact"}
    assert (
        value(after, duration, f"{duration}_count", **key)
        - value(before, duration, f"{duration}_count", **key)
        == 1
    )


def job_observed_for_test(sender, task, **kwargs):
    from knowledge.metrics import job_observed

    job_observed(sender, task=task, **kwargs)


def test_made_up_methods_add_no_series(world, metrics_on):
    """The method label comes from a closed set: requests with invented methods are counted
    under `other`, so anonymous traffic cannot grow the series without bound."""
    client = Client()
    for path in ("/api/memory", "/knowledge/"):  # one `other` series per route may appear, once
        client.generic("BREW", path)
    scrape(client)  # and the scrape's own series
    before = scrape(client)
    for n in range(30):
        client.generic(f"M{n}X", "/api/memory")
        client.generic(f"M{n}Y", "/knowledge/")
    after = scrape(client)
    requests = "brain_http_requests"
    assert len(after[requests]) == len(before[requests])
    methods = {dict(labels).get("method") for _, labels in after[requests]}
    assert not any(m.startswith("M") and m[1:-1].isdigit() for m in methods if m)
    assert "other" in methods
