"""Our PostgreSQL backend (brainsite.postgres): a persistent connection is health-checked at
the start of a request only after it has been idle a while."""

from django.db import connections

from brainsite.postgres import base


def _new_request(conn):
    conn.health_check_done = False  # what Django does for a reused connection at request start


def test_a_connection_used_moments_ago_is_not_pinged_an_idle_one_is(db, monkeypatch):
    conn = connections["default"]
    assert isinstance(conn, base.DatabaseWrapper)
    monkeypatch.setattr(conn, "health_check_enabled", True)
    pings = []
    real = base.DatabaseWrapper.is_usable
    monkeypatch.setattr(base.DatabaseWrapper, "is_usable", lambda self: pings.append(1) or real(self))
    with conn.cursor() as cursor:
        cursor.execute("SELECT 1")
    _new_request(conn)
    with conn.cursor() as cursor:
        cursor.execute("SELECT 2")
    assert pings == []  # used a moment ago: known good
    monkeypatch.setattr(base, "HEALTH_CHECK_AFTER_IDLE", 0.0)
    _new_request(conn)
    with conn.cursor() as cursor:
        cursor.execute("SELECT 3")
        assert cursor.fetchone() == (3,)
    assert pings == [1]  # idle: checked (and healthy, so kept)
