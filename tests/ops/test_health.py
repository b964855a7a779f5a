"""/healthz and the Status page tell a stale worker from a working one, and the API answers 503
JSON (not a 500 page) while the database is away."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from curation.status import selectors as memory_status
from knowledge.models import Heartbeat
from tests import factory


@pytest.fixture
def beat_at(db, settings):
    settings.BRAIN_WORKER_HEARTBEAT_SECONDS = 10

    def set_beat(seconds_ago: float | None):
        Heartbeat.objects.all().delete()
        if seconds_ago is not None:
            Heartbeat.objects.create(name="worker", beat_at=timezone.now() - timedelta(seconds=seconds_ago))

    return set_beat


@pytest.mark.parametrize(
    ("seconds_ago", "status", "worker"),
    [(5, "ok", "ok"), (29, "ok", "ok"), (31, "degraded", "stale"), (None, "degraded", "never")],
)
def test_healthz_is_degraded_when_the_heartbeat_is_older_than_three_beats(
    client, beat_at, seconds_ago, status, worker
):
    beat_at(seconds_ago)
    response = client.get("/healthz")
    assert response.status_code == 200  # still serving: a load balancer keeps sending requests
    body = response.json()
    assert (body["status"], body["worker"], body["worker_stale_after_seconds"]) == (status, worker, 30.0)
    assert bool(body["problems"]) == (status == "degraded")


@pytest.mark.parametrize(
    ("waited", "job_started_ago", "worker"),
    [
        (None, None, "ok"),  # nothing waits
        (30, 700, "ok"),  # jobs wait a little: the workers are busy
        (700, 5, "ok"),  # jobs waited long, but one started just now: busy, and taking work
        (700, 700, "stuck"),  # jobs waited longer than any job may run, and none started
        (700, None, "stuck"),
    ],
)
def test_healthz_is_degraded_when_jobs_wait_and_the_beating_worker_starts_none(
    client, beat_at, settings, waited, job_started_ago, worker
):
    from django_q.models import OrmQ

    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600}  # stuck after 600 + 30 s
    beat_at(1)
    now = timezone.now()
    if job_started_ago is not None:
        Heartbeat.objects.create(name="job", beat_at=now - timedelta(seconds=job_started_ago))
    if waited is not None:
        for n in range(60):
            OrmQ.objects.create(key="brain", payload="x", lock=now - timedelta(seconds=waited - n))
    body = client.get("/healthz").json()
    assert (body["worker"], body["status"]) == (worker, "ok" if worker == "ok" else "degraded")
    if worker == "stuck":
        assert body["problems"] == ["jobs wait and the worker has started none"]


def test_status_alerts_on_the_same_stale_heartbeat(beat_at):
    def worker_alerts():
        alerts = memory_status.alerts(memory_status.recall_status(), memory_status.job_status())
        return [a for a in alerts if a["text"].startswith("The worker")]

    beat_at(31)
    assert [a["level"] for a in worker_alerts()] == ["error"]
    assert "has not reported since" in worker_alerts()[0]["text"]
    beat_at(5)
    assert worker_alerts() == []


def test_the_api_answers_503_json_while_the_database_is_away(transactional_db, tmp_path):
    token = factory.make_token(agent=factory.make_agent("db-away"))
    browser = Client(raise_request_exception=False)
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict["HOST"] = str(tmp_path)  # a socket directory with no server in it
    try:
        api = browser.get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}")
        console = browser.post("/login/", {"username": "adam", "password": "correct-horse-9"})
    finally:
        connection.close()
        connection.settings_dict.update(saved)
    assert api.status_code == 503
    assert api["Content-Type"] == "application/json"
    assert api.json()["error"] == "database_unavailable"
    assert api["Retry-After"] == "5"
    assert console.status_code == 503 and console["Content-Type"].startswith("text/plain")
    # Back: the next request reconnects on its own.
    assert browser.get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
