"""Traces: off by default, on with the standard OTEL_* variables; a memory_search under a
recording span gets a span of its own with one child per step and per route that ran (the
SDK's in-memory exporter)."""

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from brainsite.ops.tracing import tracing_enabled
from knowledge import metrics
from knowledge.principal import Principal
from memory.recall import memory_search, resolve_scope
from tests import factory


def test_tracing_is_off_unless_the_otel_variables_ask_for_an_exporter():
    assert not tracing_enabled({})
    assert not tracing_enabled({"OTEL_SERVICE_NAME": "brain"})
    assert not tracing_enabled(
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    )
    assert tracing_enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing_enabled({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing_enabled({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"})


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics.tracer_provider = provider
    yield provider, exporter
    metrics.tracer_provider = None


def test_a_search_gets_a_span_per_step_and_route_under_the_request(world, spans):
    provider, exporter = spans
    factory.make_memory(world.copilot, "The VPN drops after the client update; reinstall the profile.")
    scope = resolve_scope(Principal.system("t"), agent=world.copilot, channel=world.general)

    memory_search(scope, q="vpn drops", k=3)  # no recording span around it: nothing is traced
    assert exporter.get_finished_spans() == ()

    with provider.get_tracer("test").start_as_current_span("POST /api/memory/search") as request_span:
        memory_search(scope, q="vpn drops", k=3)
    finished = {s.name: s for s in exporter.get_finished_spans()}
    search = finished["memory_search"]
    assert search.parent.span_id == request_span.get_span_context().span_id
    for name in ("recall.keyword_knowledge", "recall.keyword_messages", "recall.fusion", "recall.packing"):
        assert finished[name].parent.span_id == search.context.span_id, name
        assert search.start_time <= finished[name].start_time <= finished[name].end_time <= search.end_time
    assert finished["recall.keyword_knowledge"].attributes["brain.hits"] >= 1
    assert "recall.vector_knowledge" in finished and "recall.embedding" in finished
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_with_an_exporter_named_every_django_request_is_a_span(tmp_path):
    """A process started with OTEL_TRACES_EXPORTER=console traces its requests (the Django
    instrumentation is installed before the app is built, as brainsite.wsgi/asgi do)."""
    import subprocess

    from tests.ops.conftest import PY, ROOT, base_env

    code = (
        "from brainsite.wsgi import application\n"
        "from django.test import Client\n"
        "from opentelemetry import trace\n"
        "print('STATUS', Client().get('/api/no-such-thing').status_code)\n"
        "trace.get_tracer_provider().force_flush()\n"
    )
    env = base_env(
        OTEL_TRACES_EXPORTER="console",
        BRAIN_VAR_DIR=str(tmp_path / "var"),
        BRAIN_ALLOWED_HOSTS="testserver",
        # A 404 needs no database: point at none rather than start the embedded one.
        DATABASE_URL="postgresql://nobody@127.0.0.1:1/none",
    )
    out = subprocess.run([PY, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert "STATUS 404" in out.stdout, out.stderr[-2000:]
    assert '"http.status_code": 404' in out.stdout or '"http.response.status_code": 404' in out.stdout
    assert '"service.name": "brain"' in out.stdout
