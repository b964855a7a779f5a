"""A request that fails because the database went away says truthfully what it wrote: the 503
once said "nothing was written" for writes that had been committed (the database went away
while the answer was read back, or during the COMMIT itself, after the server had committed).
The connection counts its commits (brainsite.postgres.base); the 503 says `written`: false,
true, or null when a COMMIT got no answer."""

import psycopg
import pytest
from django.db import OperationalError, connection

from knowledge.models import Entry, Memory

pytestmark = pytest.mark.django_db(transaction=True)  # real commits, as on a server

MEMORY = {
    "scope": "agent",
    "text": "Stored before the outage.",
    "sources": [{"kind": "ticket", "ref": "T-9"}],
}
ENTRY = {"name": "Outage runbook", "scope": "shared", "blocks": [{"text": "Restart the database."}]}


class AwayAfterCommit:
    """A query wrapper: once `commits` more commits have happened, every query fails as if the
    server had gone."""

    def __init__(self, commits=1):
        self.after = connection.commits + commits

    def __call__(self, execute, sql, params, many, context):
        if connection.commits >= self.after:
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)


def _client(world):
    client = world.client("scribe")
    client.raise_request_exception = False  # the 503 is the answer under test
    return client


def test_a_write_committed_before_the_database_went_away_is_reported_as_stored(world):
    client = _client(world)
    with connection.execute_wrapper(AwayAfterCommit()):
        answer = client.post("/api/entries", ENTRY, format="json")  # the entry is read back after commit
    assert answer.status_code == 503 and answer["Retry-After"]
    body = answer.json()
    assert body["error"] == "database_unavailable" and body["written"] is True
    assert "they are stored" in body["detail"] and "nothing was written" not in body["detail"]
    assert Entry.objects.filter(name=ENTRY["name"]).count() == 1


def test_a_commit_without_an_answer_is_reported_as_unknown(world):
    """The server committed, and the connection broke before its answer arrived."""
    client = _client(world)
    client.get("/api/me")  # the connection is open
    raw = connection.connection
    real_commit = raw.commit

    def commit_then_break():
        real_commit()
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    raw.commit = commit_then_break
    try:
        answer = client.post("/api/memory", MEMORY, format="json")
    finally:
        raw.commit = real_commit
    assert answer.status_code == 503
    assert answer.json()["written"] is None and "may or may not be stored" in answer.json()["detail"]
    assert Memory.objects.filter(text=MEMORY["text"]).count() == 1


def test_a_request_that_wrote_nothing_still_says_so(world):
    client = _client(world)
    with connection.execute_wrapper(AwayAfterCommit(commits=0)):
        answer = client.post("/api/memory", MEMORY, format="json")
    assert answer.status_code == 503
    assert answer.json()["written"] is False and "nothing was written" in answer.json()["detail"]
    assert not Memory.objects.filter(text=MEMORY["text"]).exists()
