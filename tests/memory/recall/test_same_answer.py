"""Same question, same answer (issue 49): a search's ranking does not depend on which process
answers it or on what that process saw earlier. A second Brain process (a server on the test
database) searches before a write and again after it; the test process, which never searched
before, must rank exactly as it does."""

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from knowledge.models import Episode, Message
from tests import factory

pytestmark = pytest.mark.django_db(transaction=True)  # the server reads what the test commits

ROOT = Path(__file__).resolve().parents[3]
CHAT = [
    "The VPN keeps dropping every few minutes since Tuesday's update",
    "Did you try turning the laptop off and on again?",
    "Yes. The client now shows error E4012 when it reconnects",
    "Lunch today is at noon in the big meeting room",
    "The quarterly budget review moved to Thursday afternoon",
    "Printer on floor three is out of toner again",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def other_process(tmp_path):
    """`manage.py runserver` in a process of its own, on the test database."""
    db = connection.settings_dict
    port = _free_port()
    url = f"postgresql://{db['USER']}:{db['PASSWORD']}@{':' + str(db['PORT']) if db['PORT'] else ''}/{db['NAME']}"
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in {"PYTEST_CURRENT_TEST", "PROMETHEUS_MULTIPROC_DIR"}
        },
        "DJANGO_SETTINGS_MODULE": "brainsite.settings",
        "DATABASE_URL": f"{url}?host={db['HOST']}" if db["HOST"] else url,
        "BRAIN_VAR_DIR": str(tmp_path),
        "BRAIN_EMBEDDING_KICK": "0",
        "BRAIN_LOG_LEVEL": "WARNING",
    }
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the second process never answered /healthz"
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def ranking(result: dict) -> list[tuple]:
    return [(r["kind"], r["id"], r["score"], r["routes"]) for r in result["results"]]


def test_two_processes_rank_a_search_the_same_after_a_write(world, other_process):
    conv = factory.make_conversation(world.copilot, world.general)
    now = timezone.now()
    ids = factory.post_messages(
        world.general,
        [
            {"speaker": "alice", "text": t, "ts": now - timedelta(days=30, minutes=-i)}
            for i, t in enumerate(CHAT)
        ],
    )
    factory.embed_all()
    body = {"agent": "copilot", "conversation": conv.pk, "q": "why can't people work from home", "k": 5}
    token = {"Authorization": f"Bearer {world.tokens['copilot']}"}

    def there() -> dict:
        response = httpx.post(f"{other_process}/api/memory/search", json=body, headers=token, timeout=60)
        assert response.status_code == 200, response.text[:500]
        return response.json()

    def here() -> dict:
        response = world.client("copilot").post("/api/memory/search", body, format="json")
        assert response.status_code == 200, response.content[:500]
        return response.json()

    before = there()  # the other process has now seen the data as it was
    assert not any(r["kind"] == "episode" for r in before["results"])
    # The write: stage A's first episode, covering the VPN exchange, embedded by the backlog.
    episode = Episode.objects.create(
        channel=world.general,
        store="shared",
        topic="VPN outage after the client update",
        summary="Remote access broke for several people; reconnecting showed an error code.",
        likely_question="Why can't I connect from home?",
        resolution="Re-import the profile.",
        start_ts=now - timedelta(days=30),
        end_ts=now - timedelta(days=30, minutes=-3),
    )
    Message.objects.filter(pk__in=ids[:3]).update(episode=episode)
    factory.embed_all()
    mine, theirs = here(), there()
    assert ranking(mine)[0][:2] == ("episode", episode.pk)
    assert ranking(theirs) == ranking(mine)
