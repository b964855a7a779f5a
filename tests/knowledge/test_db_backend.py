"""brainsite.postgres: a reused connection's health check looks at the connection instead of
sending a query, and still replaces a connection the server has closed."""

import time

import pytest
from django.db import connections

from brainsite.postgres.base import DatabaseWrapper


@pytest.fixture
def own_connection(db):
    """A second connection to the test database, outside the test's transaction, checked the
    way a persistent connection is checked at the start of each request."""
    wrapper = connections.create_connection("default")
    wrapper.settings_dict = {**wrapper.settings_dict, "CONN_HEALTH_CHECKS": True}
    wrapper.health_check_enabled = True
    yield wrapper
    wrapper.close()


def backend_pid(wrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def new_request(wrapper):
    wrapper.health_check_done = False


def test_settings_use_brains_backend(own_connection):
    assert isinstance(own_connection, DatabaseWrapper)


def test_a_healthy_connection_is_kept_without_a_query(own_connection, monkeypatch):
    pid = backend_pid(own_connection)
    asked = []  # Django's check sends its SELECT 1 from is_usable()
    monkeypatch.setattr(DatabaseWrapper, "is_usable", lambda self: asked.append(1) or True)
    new_request(own_connection)
    own_connection.close_if_health_check_failed()
    assert asked == []
    assert own_connection.connection is not None
    assert backend_pid(own_connection) == pid


def test_a_connection_the_server_closed_is_replaced(own_connection, db):
    pid = backend_pid(own_connection)
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        assert cursor.fetchone()[0] is True
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            if cursor.fetchone()[0] == 0:
                break
            time.sleep(0.05)
    new_request(own_connection)
    # Without the check this query would fail with "terminating connection".
    assert backend_pid(own_connection) != pid


def test_a_connection_left_inside_a_transaction_is_replaced(own_connection):
    pid = backend_pid(own_connection)
    own_connection.connection.autocommit = False
    own_connection.connection.execute("SELECT 1")  # opens a transaction and leaves it open
    new_request(own_connection)
    own_connection.close_if_health_check_failed()
    assert own_connection.connection is None
    assert backend_pid(own_connection) != pid
