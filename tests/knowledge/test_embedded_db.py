"""The embedded PostgreSQL is tuned when it starts (brainsite.embedded_db)."""

import pytest
from django.conf import settings
from django.db import connection

from brainsite.embedded_db import shared_buffers_mb


@pytest.mark.skipif(not settings.EMBEDDED_DATABASE, reason="an external database is tuned by its owner")
def test_the_embedded_server_runs_with_our_buffer_cache(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'")
        assert cursor.fetchone()[0] == shared_buffers_mb()
    assert 128 <= shared_buffers_mb() <= 4096
