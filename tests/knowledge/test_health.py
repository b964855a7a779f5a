from django.db import connection

from brainsite.ops.worker import beat_write


def test_healthz_reports_database_migrations_and_worker(client, db):
    body = client.get("/healthz").json()
    assert body["database_reachable"] is True
    assert body["migrations_applied"] is True
    assert body["database"] == "embedded"
    assert body["worker_heartbeat_age_seconds"] is None
    beat_write("worker")  # what the worker's sentinel writes every beat
    body = client.get("/healthz").json()
    assert 0 <= body["worker_heartbeat_age_seconds"] < 60


def test_healthz_is_503_when_the_database_is_down(client, transactional_db, tmp_path):
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict["HOST"] = str(tmp_path)  # a socket directory with no server in it
    try:
        response = client.get("/healthz")
    finally:
        connection.close()
        connection.settings_dict.update(saved)
    assert response.status_code == 503
    assert response.json()["database_reachable"] is False
