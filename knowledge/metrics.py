"""The process-side Prometheus instruments: counters and histograms that request handling and
recall update as they go. Everything read from the database (queue sizes, backlog, jobs, model
usage, lag) is computed when /metrics is scraped instead (brainsite/ops/metrics.py), so no hot
path runs an extra query for it.

Multi-process mode: the web server runs several processes and the worker cluster forks pool
processes; each writes its values to files of its own under PROMETHEUS_MULTIPROC_DIR (default
var/metrics, settings.BRAIN_METRICS_DIR, which sets the variable before any app imports
prometheus_client) and a scrape of any web process sums them."""

import os
import time

from django.conf import settings
from opentelemetry import trace
from prometheus_client import Counter, Histogram

os.makedirs(settings.BRAIN_METRICS_DIR, exist_ok=True)

# Seconds; a search step is a few ms, a request up to a model-backed call of seconds.
STEP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

http_requests = Counter(
    "brain_http_requests",
    "HTTP requests answered, by URL route (the pattern, not the path), method and status.",
    ["route", "method", "status"],
)
http_duration = Histogram(
    "brain_http_request_duration_seconds",
    "Time to answer an HTTP request, by URL route and method.",
    ["route", "method"],
    buckets=REQUEST_BUCKETS,
)
recall_step = Histogram(
    "brain_recall_step_seconds",
    "memory_search time by step: embedding (the query vector), each route by its name, fusion "
    "(fuse, decay, load the best rows, rerank), packing (expand and fit the budget), total.",
    ["step"],
    buckets=STEP_BUCKETS,
)


jobs_run = Counter(
    "brain_jobs_run",
    "Background jobs the worker cluster finished, by function and outcome (ok, failed).",
    ["func", "outcome"],
)
job_duration = Histogram(
    "brain_job_duration_seconds",
    "Time a background job ran, by function.",
    ["func"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0),
)


def job_observed(sender, task: dict, **kwargs) -> None:
    """django-q2's post_execute receiver (connected by brainsite.ops.worker in the cluster's
    monitor process): one count and one duration per finished job."""
    func = task.get("func")
    name = (
        func
        if isinstance(func, str)
        else f"{getattr(func, '__module__', '')}.{getattr(func, '__name__', func)}"
    )
    jobs_run.labels(name, "ok" if task.get("success") else "failed").inc()
    started, stopped = task.get("started"), task.get("stopped")
    if started and stopped:
        job_duration.labels(name).observe(max((stopped - started).total_seconds(), 0.0))


# Labels come from closed sets only, so no client can add series: a method outside these is
# `other` (the route is a URL pattern, never a raw path; the status a three-digit code).
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def http_observe(*, route: str, method: str, status: int, seconds: float) -> None:
    method = method if method in HTTP_METHODS else "other"
    status_label = str(status) if 100 <= status <= 599 else "other"
    http_requests.labels(route, method, status_label).inc()
    http_duration.labels(route, method).observe(seconds)


def recall_observe(
    *, embed_ms: float, routes: dict[str, dict], fusion_ms: float, pack_ms: float, total_ms: float
):
    """One observation per step of one memory_search (`routes` as Ranking.routes: only the routes
    that ran are observed)."""
    if embed_ms:
        recall_step.labels("embedding").observe(embed_ms / 1000)
    for name, info in routes.items():
        if info["ran"]:
            recall_step.labels(name).observe(info["ms"] / 1000)
    recall_step.labels("fusion").observe(fusion_ms / 1000)
    recall_step.labels("packing").observe(pack_ms / 1000)
    recall_step.labels("total").observe(total_ms / 1000)
    if trace.get_current_span().is_recording():
        _recall_spans(
            embed_ms=embed_ms, routes=routes, fusion_ms=fusion_ms, pack_ms=pack_ms, total_ms=total_ms
        )


# Traces (brainsite/ops/tracing.py turns them on): a `memory_search` span under the request's
# span, with a child per step. The routes run batched in one round trip and the vector side on a
# helper thread, so the spans are drawn afterwards from the measured times, not opened around
# the work: with tracing off nothing here runs, and with it on a search opens no span while it
# works. A route's span starts with its side of the search (keyword routes at the start, vector
# routes after the embedding) and lasts the route's own time.
tracer_provider = None  # a test's provider; None: the global one


def _recall_spans(*, embed_ms, routes, fusion_ms, pack_ms, total_ms) -> None:
    tracer = trace.get_tracer("brain.recall", tracer_provider=tracer_provider)
    end = time.time_ns()
    start = end - int(total_ms * 1e6)
    search = tracer.start_span("memory_search", start_time=start)
    context = trace.set_span_in_context(search)

    def child(name: str, begin: int, ms: float, **attributes) -> None:
        span = tracer.start_span(name, context=context, start_time=begin, attributes=attributes)
        span.end(end_time=begin + int(ms * 1e6))

    if embed_ms:
        child("recall.embedding", start, embed_ms)
    for name, info in routes.items():
        if info["ran"]:
            begin = start + (int(embed_ms * 1e6) if name.startswith("vector") else 0)
            if name.startswith("second_hop"):  # after the first fusion, before the last
                begin = end - int((pack_ms + fusion_ms + info["ms"]) * 1e6)
            child(f"recall.{name}", begin, info["ms"], **{"brain.route": name, "brain.hits": info["hits"]})
    child("recall.fusion", end - int((pack_ms + fusion_ms) * 1e6), fusion_ms)
    child("recall.packing", end - int(pack_ms * 1e6), pack_ms)
    search.end(end_time=end)
