"""GET /metrics: Prometheus text format. Counters and histograms come from every process's
files (knowledge.metrics, multi-process mode); what lives in the database — the review queue,
the embedding backlog, jobs, model usage, Dreaming lag, connections, replica lag — is read once
per scrape by DatabaseCollector, so no request pays for it. The names are listed in
docs/METRICS.md.

Access: only with `Authorization: Bearer $BRAIN_METRICS_TOKEN`; without that setting the
endpoint answers 404, so a public port never shows it by accident."""

import hmac
import time

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest  # noqa: I001  (after knowledge.metrics)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from knowledge import metrics as instruments


class MetricsMiddleware:
    """Counts and times every request Django answers, labelled by its URL pattern (bounded
    cardinality: `api/memory/<int:pk>`, never the id)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None:
            route = "/" + match.route
        elif request.path.startswith("/" + settings.STATIC_URL.lstrip("/")):
            route = "static"
        else:
            route = "unmatched"
        instruments.http_observe(
            route=route,
            method=request.method,
            status=response.status_code,
            seconds=time.perf_counter() - started,
        )
        return response


def asgi_observed(app, route: str):
    """The same counters for an ASGI app Django does not see (the MCP transport at /mcp/)."""

    async def observed(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        started = time.perf_counter()
        status, counted = 500, False

        def count():
            nonlocal counted
            if not counted:
                counted = True
                instruments.http_observe(
                    route=route,
                    method=scope.get("method", ""),
                    status=status,
                    seconds=time.perf_counter() - started,
                )

        async def sending(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                count()  # before the client has the whole response: a scrape after it sees it
            await send(message)

        try:
            await app(scope, receive, sending)
        finally:
            count()  # a response cut short (or none) counts too

    return observed


class DatabaseCollector:
    """Gauges and counters read from the database at scrape time. A database that does not
    answer gives `brain_database_up 0` and nothing else from here."""

    def collect(self):
        up = GaugeMetricFamily("brain_database_up", "1 when the primary database answered this scrape.")
        try:
            families = list(self._families())
        except DatabaseError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families
        yield from self._replica()

    def _families(self):
        from curation.dreaming.stage_a.selectors import channel_lags
        from curation.status.selectors import job_status
        from knowledge.embeddings import embedder as embeddings
        from knowledge.embeddings.backlog import coverage
        from knowledge.models import ModelUsage
        from memory.lifecycle.selectors import queue_count

        queue = GaugeMetricFamily("brain_review_queue", "Memories waiting for review.")
        queue.add_metric([], queue_count())
        yield queue

        backlog = GaugeMetricFamily(
            "brain_embedding_backlog",
            "Texts without a vector from the current model, by kind.",
            labels=["kind"],
        )
        try:
            cover = coverage()
        except embeddings.EmbeddingError:
            cover = {}
        for kind, c in cover.items():
            backlog.add_metric([kind], c["backlog"])
        yield backlog

        jobs = job_status()
        family = GaugeMetricFamily(
            "brain_jobs",
            "Background jobs: queued (due, not claimed), running (claimed), stuck (claimed longer "
            "than the job timeout), failed (in the last day).",
            labels=["state"],
        )
        family.add_metric(["queued"], jobs["waiting"])
        family.add_metric(["running"], jobs["running"])
        family.add_metric(["stuck"], jobs["stuck_count"])
        family.add_metric(["failed"], jobs["failed_last_day"])
        yield family
        oldest = GaugeMetricFamily(
            "brain_jobs_oldest_queued_seconds", "Age of the oldest job waiting for a worker (0: none)."
        )
        since = jobs["oldest_waiting_since"]
        oldest.add_metric([], (timezone.now() - since).total_seconds() if since else 0)
        yield oldest

        calls = CounterMetricFamily(
            "brain_model_calls",
            "Governed model calls by job (purpose), profile and outcome (ok, invalid, error, timeout, "
            "refused, pending), from the usage table.",
            labels=["job", "profile", "outcome"],
        )
        tokens = CounterMetricFamily(
            "brain_model_tokens",
            "Model tokens by job, profile and kind (prompt, completion).",
            labels=["job", "profile", "kind"],
        )
        from django.db.models import Count, Sum

        rows = ModelUsage.objects.values("purpose", "profile", "outcome").annotate(
            n=Count("id"), p=Sum("prompt_tokens"), c=Sum("completion_tokens")
        )
        spent: dict[tuple, list[int]] = {}
        for row in rows:
            calls.add_metric([row["purpose"], row["profile"], row["outcome"]], row["n"])
            pair = spent.setdefault((row["purpose"], row["profile"]), [0, 0])
            pair[0] += row["p"] or 0
            pair[1] += row["c"] or 0
        for (job, profile), (prompt, completion) in spent.items():
            tokens.add_metric([job, profile, "prompt"], prompt)
            tokens.add_metric([job, profile, "completion"], completion)
        yield calls
        yield tokens

        lag_messages = GaugeMetricFamily(
            "brain_dreaming_lag_messages", "Messages past the stage A cursors, all channels together."
        )
        lag_seconds = GaugeMetricFamily(
            "brain_dreaming_lag_seconds", "Age of the oldest message past a stage A cursor (0: none waits)."
        )
        lags = channel_lags()
        now = timezone.now()
        lag_messages.add_metric([], sum(row.lag for row in lags))
        ages = [(now - row.oldest_ts).total_seconds() for row in lags if row.lag and row.oldest_ts]
        lag_seconds.add_metric([], max(ages, default=0))
        yield lag_messages
        yield lag_seconds

        pool = GaugeMetricFamily(
            "brain_db_connections",
            "Server connections to Brain's database by state (active, idle, idle in transaction, …), all "
            "processes together; and the server's max_connections.",
            labels=["state"],
        )
        with connection.cursor() as cur:
            cur.execute(
                "SELECT coalesce(state, 'other'), count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() GROUP BY 1"
            )
            for state, n in cur.fetchall():
                pool.add_metric([state], n)
            cur.execute("SELECT setting::int FROM pg_settings WHERE name = 'max_connections'")
            pool.add_metric(["max"], cur.fetchone()[0])
        yield pool

    def _replica(self):
        from knowledge.replica import replica_configured, replica_lag_seconds

        if not replica_configured():
            return

        lag = GaugeMetricFamily(
            "brain_replica_lag_seconds",
            "How far the read replica is behind the primary (seconds since the last replayed "
            "transaction while the primary has newer ones; -1: the replica does not answer).",
        )
        seconds = replica_lag_seconds()
        lag.add_metric([], -1 if seconds is None else seconds)
        yield lag


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    registry.register(DatabaseCollector())
    return registry


def metrics_view(request):
    token = settings.BRAIN_METRICS_TOKEN
    if not token:
        return JsonResponse(
            {"error": "not_found", "detail": "Metrics are off: set BRAIN_METRICS_TOKEN."}, status=404
        )
    sent = request.headers.get("Authorization", "")
    if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
        return JsonResponse(
            {"error": "not_authenticated", "detail": "Send Authorization: Bearer <BRAIN_METRICS_TOKEN>."},
            status=401,
        )
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
