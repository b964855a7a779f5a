"""OpenTelemetry traces, off by default. On when the standard variables ask for an exporter:
OTEL_TRACES_EXPORTER (`otlp` or `console`; `none` keeps it off) or an OTLP endpoint
(OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). The rest is the SDK's own
standard configuration: OTEL_SERVICE_NAME (default here "brain"), OTEL_RESOURCE_ATTRIBUTES,
OTEL_TRACES_SAMPLER(_ARG), OTEL_EXPORTER_OTLP_HEADERS, …

What is traced: every Django request (opentelemetry-instrumentation-django; MCP requests are
outside Django and get no request span), every outgoing HTTP call made with httpx (model
endpoints, embedding endpoints, webhooks), and each `memory_search` with a span per step and per
recall route (knowledge/metrics.py). Database statements are not traced (the psycopg
instrumentation has no release for this SDK yet); the recall spans carry the routes' times."""

import os

_done = False


def tracing_enabled(environ=os.environ) -> bool:
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none" and environ.get("OTEL_SDK_DISABLED", "").lower() != "true"
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def tracing_setup() -> bool:
    """Install the tracer provider and the Django and httpx instrumentation once per process,
    before Django's application is built; False (and nothing imported) when tracing is off."""
    global _done
    if _done or not tracing_enabled():
        return _done
    from opentelemetry import trace
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    os.environ.setdefault("OTEL_SERVICE_NAME", "brain")
    provider = TracerProvider(resource=Resource.create())
    names = [
        n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").lower().split(",") if n.strip()
    ]
    for name in names:
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    DjangoInstrumentor().instrument()
    HTTPXClientInstrumentor().instrument()
    _done = True
    return True
