"""Signals: routed by admins' rules, idempotent, and `learn: false` signals never reach
Dreaming (stage A reads no such message)."""

import pytest

from curation.dreaming.stage_a.selectors import batch_next, channel_lags
from knowledge.models import Channel, Message, Signal

pytestmark = pytest.mark.django_db


def _rule(client, **fields):
    body = {
        "source": "erp",
        "type": "price",
        "channel": "prices",
        "memory_scope": "shared",
        "learn": False,
        **fields,
    }
    return client.post("/api/signal-rules", body, format="json")


def _signal(client, external_id, text="Widget price is 9.99", type="price"):
    return client.post(
        "/api/signals",
        {"source": "erp", "type": type, "text": text, "external_id": external_id, "data": {"sku": "W1"}},
        format="json",
    )


def test_a_learn_false_signal_is_kept_as_a_message_but_never_reaches_dreaming(world):
    admin = world.client("admin")
    assert _rule(admin).status_code == 201
    sent = _signal(world.client("integration"), "p-1")
    assert sent.status_code == 201, sent.json()
    assert sent.json()["learn"] is False and sent.json()["channel"] == "prices"
    message = Message.objects.get(pk=sent.json()["message"])
    assert message.learn is False and message.text == "Widget price is 9.99"
    channel = Channel.objects.get(name="prices")
    assert batch_next(channel, None).messages == []
    assert [lag.lag for lag in channel_lags(channel.pk)] == [0]


def test_signals_are_idempotent_by_external_id_and_need_a_rule(world):
    admin, integration = world.client("admin"), world.client("integration")
    assert _signal(integration, "x-1").status_code == 400  # no rule yet
    _rule(admin, learn=True)
    first = _signal(integration, "x-1")
    again = _signal(integration, "x-1", text="changed")
    assert first.status_code == 201 and again.status_code == 200 and again.json()["duplicate"] is True
    assert Signal.objects.count() == 1 and Message.objects.filter(channel__name="prices").count() == 1
    channel = Channel.objects.get(name="prices")
    assert [m.id for m in batch_next(channel, None).messages] == [first.json()["message"]]


def test_a_changed_rule_applies_to_the_next_signals_and_moves_no_old_message(world):
    admin, integration = world.client("admin"), world.client("integration")
    rule = _rule(admin, learn=True).json()
    old = _signal(integration, "s-1").json()
    assert old["store"] == "shared"
    changed = admin.put(
        f"/api/signal-rules/{rule['id']}",
        {"source": "erp", "type": "price", "channel": "prices", "memory_scope": "channel", "learn": True},
        format="json",
    )
    assert changed.status_code == 200
    new = _signal(integration, "s-2").json()
    assert new["store"] == "channel:prices"
    assert Message.objects.get(pk=old["message"]).store == "shared"


def test_only_admins_manage_rules(world):
    assert _rule(world.client("reviewer")).status_code == 403
    assert _rule(world.client("integration")).status_code == 403
    assert world.client("copilot").post("/api/signals", {}, format="json").status_code == 403


def test_a_signal_gives_its_integration_no_part_in_the_channel(world):
    """Posting a signal is what the rule allows; posting the integration's own messages in that
    channel takes an admin's grant (a part in the channel)."""
    _rule(world.client("admin"), learn=True)
    integration = world.client("integration")
    assert _signal(integration, "g-1").status_code == 201
    channel = Channel.objects.get(name="prices")
    assert not channel.integrations.exists()
    body = {"channel": "prices", "speaker": "alice", "text": "Alice says: refund me"}
    assert integration.post("/api/messages", body, format="json").status_code == 403
    assert not Message.objects.filter(text="Alice says: refund me").exists()
    from knowledge.conversations.services import channel_integration_add
    from knowledge.models import Integration
    from tests import factory

    channel_integration_add(
        actor=factory.SYSTEM, channel=channel, integration=Integration.objects.get(name="tickets")
    )
    assert integration.post("/api/messages", body, format="json").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_sixty_identical_signals_at_once_store_one_and_answer_every_sender(world):
    """Sent at the same moment, 60 identical signals used to race on the unique constraint: 46
    of 60 senders got a 500. Now one is stored and every sender gets a JSON answer naming it."""
    import threading

    from django.db import connection
    from rest_framework.test import APIClient

    assert _rule(world.client("admin"), learn=True).status_code == 201
    token = world.tokens["integration"]
    senders = 60
    barrier = threading.Barrier(senders)
    answers = [None] * senders

    def send(i):
        client = APIClient()
        client.raise_request_exception = False
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        try:
            barrier.wait()
            answers[i] = _signal(client, "same-moment")
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * (senders - 1) + [201], statuses
    assert {a.json()["message"] for a in answers} == {Signal.objects.get().message_id}
    assert Message.objects.filter(channel__name="prices").count() == 1
    assert Channel.objects.filter(name="prices").count() == 1
