"""Issue 52.7 against the stub made to behave like llama-cpp-python's one-slot server (it answers
one request at a time, `GET /v1/models` included): a server busy generating is `busy`, not
unreachable; Brain sends at most BRAIN_MODEL_ENDPOINT_SLOTS calls at a time to one server, and
the time a call waits for a free slot is measured apart from its own time and not spent from
its timeout."""

import socket
import threading
import time

import httpx
import pytest
from django.db import connection

from curation.model_status import models_alerts, models_status
from knowledge.llm import ModelUnreachable, endpoint_down, model_call, reach
from knowledge.llm.slots import endpoint_slot, slots_taken
from knowledge.models import ModelUsage

ASK = [{"role": "user", "content": "Say hi"}]


def _hold_the_servers_slot(stub, seconds):
    """A request of another client keeps the one-slot stub generating for `seconds`."""
    stub.reply_delay(seconds, "hi")
    thread = threading.Thread(
        target=lambda: httpx.post(f"{stub.url}/chat/completions", json={"messages": ASK}, timeout=30),
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + 10
    while stub.serving == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert stub.serving == 1
    return thread


@pytest.mark.django_db
def test_a_one_slot_server_that_is_generating_is_busy_not_unreachable(model_stub, monkeypatch):
    model_stub.slots = 1
    monkeypatch.setattr(reach, "CHECK_TIMEOUT_SECONDS", 0.5)
    generating = _hold_the_servers_slot(model_stub, 3)
    found = reach.endpoints_check()
    assert set(found.values()) == {found["default"]} and found["default"].startswith(
        "busy: it took the connection"
    )
    assert endpoint_down() == "" and endpoint_down("light") == ""  # jobs do not skip their model work
    report = models_status()
    assert {p["endpoint"] for p in report["profiles"]} == {"busy"}
    assert models_alerts(report) == []
    generating.join()


@pytest.mark.django_db
def test_a_server_that_cannot_be_connected_to_is_unreachable(model_stub, settings):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings.BRAIN_MODEL_BASE_URL = f"http://127.0.0.1:{port}/v1"
    found = reach.endpoints_check()
    assert found["default"].startswith("unreachable: ConnectError")
    assert endpoint_down().startswith("unreachable")
    assert [p["endpoint"] for p in models_status()["profiles"]] == ["unreachable", "unreachable"]


def _concurrent_calls(n: int) -> list:
    """n model calls at once from threads of their own (each with its own connection)."""
    out, start = [None] * n, threading.Barrier(n)

    def call(i):
        start.wait()
        try:
            out[i] = model_call(purpose="slots.test", messages=ASK, max_tokens=16)
        except Exception as exc:  # the test looks at what each call ended with
            out[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return out


@pytest.mark.django_db(transaction=True)
def test_waiting_for_the_servers_slot_is_not_spent_from_a_calls_timeout(model_stub, settings):
    """Two calls at once to a one-slot server answering in 2 s, with a 3.5 s timeout: sent
    together, the second waits 2 s in the server's queue and times out (at least 4 s); with one
    Brain slot per endpoint it waits for the slot instead, measured, and both are answered."""
    model_stub.slots = 1
    model_stub.respond_with(lambda body: {"content": "hi", "delay": 2})
    settings.BRAIN_MODEL_TIMEOUT_SECONDS = 3.5

    settings.BRAIN_MODEL_ENDPOINT_SLOTS = 0  # no limit: both are sent at once
    ended = _concurrent_calls(2)
    assert sorted(type(e).__name__ for e in ended) == ["ModelReply", "ModelUnreachable"]
    assert "no answer within 3.5 s" in next(e for e in ended if isinstance(e, ModelUnreachable)).reason

    ModelUsage.objects.all().delete()
    deadline = time.monotonic() + 10  # the abandoned request still holds the server's slot a while
    while model_stub.serving and time.monotonic() < deadline:
        time.sleep(0.05)
    settings.BRAIN_MODEL_ENDPOINT_SLOTS = 1
    ended = _concurrent_calls(2)
    assert all(e.__class__.__name__ == "ModelReply" and e.text == "hi" for e in ended), ended
    rows = sorted(ModelUsage.objects.filter(purpose="slots.test"), key=lambda u: u.waited_ms)
    assert [r.outcome for r in rows] == ["ok", "ok"]
    assert rows[0].waited_ms < 1000 <= rows[1].waited_ms  # the second waited for the first's slot
    assert all(r.latency_ms < 3500 for r in rows)  # its own time, without the wait


@pytest.mark.django_db
def test_a_call_that_finds_no_free_slot_in_time_is_deferred_unsent(model_stub, settings):
    settings.BRAIN_MODEL_SLOT_WAIT_SECONDS = 0.5
    model_stub.reply_text("hi")
    taken, release = threading.Event(), threading.Event()

    def other_worker():
        try:
            with endpoint_slot(model_stub.url):
                taken.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=other_worker)
    thread.start()
    assert taken.wait(10)
    try:
        assert slots_taken(model_stub.url) == 1
        with pytest.raises(ModelUnreachable, match="busy: all 1 of the endpoint's slots stayed taken"):
            model_call(purpose="slots.test", messages=ASK, max_tokens=16)
        assert model_stub.chat_requests() == []
        usage = ModelUsage.objects.get(purpose="slots.test")
        assert usage.outcome == "error" and usage.error.startswith("busy")
    finally:
        release.set()
        thread.join()
    assert slots_taken(model_stub.url) == 0
    assert model_call(purpose="slots.test", messages=ASK, max_tokens=16).text == "hi"
