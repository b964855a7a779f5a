"""Webhooks: registration (admins, validated), signed deliveries to a real loopback HTTP
receiver, retries with back-off, giving up, and the console's delivery log."""

import datetime
import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from knowledge.events.services import deliveries_send, webhooks_fanout
from knowledge.models import AuditEvent, Webhook, WebhookDelivery
from tests import factory
from tests.knowledge.events.test_feed import settle

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "a-long-shared-secret-123"


class Receiver:
    """A real HTTP server on 127.0.0.1 that answers with the scripted statuses in turn (the
    last one repeats) and records each request."""

    def __init__(self, statuses):
        self.statuses, self.requests = list(statuses), []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append({"headers": dict(self.headers), "body": body})
                status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_factory():
    made = []

    def make(*statuses):
        made.append(Receiver(statuses))
        return made[-1]

    yield make
    for r in made:
        r.close()


@pytest.fixture(autouse=True)
def loopback_receivers_allowed(settings):
    """The receivers here listen on loopback, which webhooks may reach only by name."""
    settings.BRAIN_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]


def fanout():
    settle()
    return webhooks_fanout()


def _register(world, url, events=("memory.written",)):
    settle()  # a webhook starts at the feed's head: let it reach every write so far
    response = world.client("admin").post(
        "/api/webhooks", {"url": url, "events": list(events), "secret": SECRET}, format="json"
    )
    assert response.status_code == 201, response.content
    assert "secret" not in response.json()
    return response.json()


def test_a_delivery_is_signed_and_retried_with_back_off_until_it_succeeds(world, receiver_factory, settings):
    settings.BRAIN_WEBHOOK_RETRY_SECONDS = 60
    receiver = receiver_factory(500, 200)
    hook = _register(world, receiver.url)
    memory = factory.make_memory(
        world.copilot, "Ana's deploy window is Friday", store="shared", run_id="r1", turn=2
    )

    assert fanout() == 1
    assert fanout() == 0  # each event is queued once
    now = timezone.now()
    assert deliveries_send(now=now) == {"delivered": 0, "retrying_or_failed": 1}
    delivery = WebhookDelivery.objects.get(webhook_id=hook["id"])
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("pending", 1, 500)
    assert delivery.next_attempt_at == now + datetime.timedelta(seconds=60)

    assert deliveries_send(now=now + datetime.timedelta(seconds=30)) == {
        "delivered": 0,
        "retrying_or_failed": 0,
    }
    assert len(receiver.requests) == 1  # not due yet
    assert deliveries_send(now=now + datetime.timedelta(seconds=61))["delivered"] == 1
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 2, 200)

    first, second = receiver.requests
    assert first["body"] == second["body"]  # a retry sends the same signed bytes
    expected = "sha256=" + hmac.new(SECRET.encode(), first["body"], hashlib.sha256).hexdigest()
    assert second["headers"]["X-Brain-Signature"] == expected
    wrong = "sha256=" + hmac.new(b"another secret", first["body"], hashlib.sha256).hexdigest()
    assert expected != wrong
    event = json.loads(first["body"])
    assert (event["type"], event["memory"], event["content_hash"]) == (
        "memory.written",
        memory.pk,
        memory.content_hash,
    )
    assert event["provenance"]["run_id"] == "r1" and event["provenance"]["turn"] == 2
    assert second["headers"]["X-Brain-Event"] == "memory.written"


def test_back_off_doubles_and_a_delivery_fails_after_the_last_try(world, receiver_factory, settings):
    settings.BRAIN_WEBHOOK_RETRY_SECONDS, settings.BRAIN_WEBHOOK_MAX_ATTEMPTS = 10, 3
    receiver = receiver_factory(503)
    _register(world, receiver.url)
    factory.make_memory(world.copilot, "something", store="shared")
    fanout()
    now = timezone.now()
    deliveries_send(now=now)
    delivery = WebhookDelivery.objects.get()
    assert delivery.next_attempt_at == now + datetime.timedelta(seconds=10)
    deliveries_send(now=now + datetime.timedelta(seconds=10))
    delivery.refresh_from_db()
    assert delivery.next_attempt_at == now + datetime.timedelta(seconds=30)  # 10 s later + 20 s
    deliveries_send(now=now + datetime.timedelta(seconds=30))
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("failed", 3)
    deliveries_send(now=now + datetime.timedelta(hours=1))
    assert len(receiver.requests) == 3


def test_an_unreachable_url_is_recorded_as_the_error(world, receiver_factory):
    receiver = receiver_factory(200)
    url = receiver.url
    receiver.close()  # nothing listens there any more
    _register(world, url)
    factory.make_memory(world.copilot, "something", store="shared")
    fanout()
    deliveries_send()
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == "pending" and delivery.last_status is None and delivery.last_error


def test_a_webhook_gets_only_its_event_types_and_only_events_after_it_was_registered(world, receiver_factory):
    before = factory.make_memory(world.copilot, "older than the webhook", store="shared")
    receiver = receiver_factory(200)
    _register(world, receiver.url, events=["memory.superseded"])
    old = factory.make_memory(world.copilot, "plan A", store="shared")
    factory.make_memory(world.copilot, "plan B", store="shared", supersedes=old)
    assert fanout() == 1
    deliveries_send()
    [request] = receiver.requests
    event = json.loads(request["body"])
    assert (event["type"], event["memory"]) == ("memory.superseded", old.pk)
    assert before.pk not in [d.memory_id for d in WebhookDelivery.objects.all()]


def test_registration_is_for_admins_and_bad_input_writes_nothing(world):
    # A public address (example.com's) as a literal: no name lookup needed to register it.
    good = {"url": "https://93.184.215.14/hook", "events": ["memory.written"], "secret": SECRET}
    assert world.client("copilot").post("/api/webhooks", good, format="json").status_code == 403
    assert world.client("reviewer").post("/api/webhooks", good, format="json").status_code == 403
    admin = world.client("admin")
    for field, bad in [
        ("url", {**good, "url": "ftp://example.org/x"}),
        ("events", {**good, "events": ["memory.exploded"]}),
        ("events", {**good, "events": []}),
        ("secret", {**good, "secret": "short"}),
        ("colour", {**good, "colour": "red"}),
    ]:
        response = admin.post("/api/webhooks", bad, format="json")
        assert response.status_code == 400 and field in response.json()["fields"], (field, response.content)
    assert not Webhook.objects.exists()

    created = admin.post("/api/webhooks", good, format="json").json()
    assert [w["id"] for w in admin.get("/api/webhooks").json()] == [created["id"]]
    assert AuditEvent.objects.filter(action="webhook.created", object_ids=[str(created["id"])]).exists()
    assert admin.delete(f"/api/webhooks/{created['id']}").status_code == 204
    assert admin.delete(f"/api/webhooks/{created['id']}").status_code == 404
    assert admin.get("/api/webhooks").json() == []


def test_the_console_page_registers_webhooks_and_shows_the_delivery_log(world, client, receiver_factory):
    receiver = receiver_factory(500)
    client.force_login(world.admin)
    response = client.post(
        "/webhooks/", {"url": receiver.url, "events": ["memory.written"], "secret": SECRET}, follow=True
    )
    assert response.status_code == 200 and b"registered" in response.content
    memory = factory.make_memory(world.copilot, "logged", store="shared")
    fanout()
    deliveries_send()
    page = client.get("/webhooks/").content.decode()
    assert receiver.url in page and f"/memories/{memory.pk}/" in page and "HTTP 500" in page
    assert SECRET not in page

    response = client.post("/webhooks/", {"url": "not a url", "events": ["memory.written"], "secret": SECRET})
    assert response.status_code == 200 and Webhook.objects.count() == 1
    webhook = Webhook.objects.get()
    client.post(f"/webhooks/{webhook.pk}/remove")
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()

    client.force_login(world.reviewer)
    assert client.get("/webhooks/").status_code == 403


def test_one_run_sends_batch_after_batch(world, receiver_factory):
    receiver = receiver_factory(200)
    _register(world, receiver.url)
    for i in range(3):
        factory.make_memory(world.copilot, f"fact {i}", store="shared")
    assert fanout() == 3
    assert deliveries_send(limit=1) == {"delivered": 3, "retrying_or_failed": 0}
    assert len(receiver.requests) == 3
    cursors = [r["headers"]["X-Brain-Cursor"] for r in receiver.requests]
    assert cursors == sorted(cursors, key=lambda c: tuple(map(int, c.split("-"))))


INTERNAL = [
    "http://127.0.0.1:8000/hook",
    "http://localhost/hook",
    "http://10.0.0.5/hook",
    "http://172.16.3.4/hook",
    "http://192.168.1.1/hook",
    "http://100.64.0.1/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://0.0.0.0/hook",
    "http://[::1]/hook",
    "http://[fd00:ec2::254]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[fe80::1]/hook",
]


@pytest.mark.parametrize("url", INTERNAL)
def test_a_webhook_to_an_internal_address_is_refused_and_writes_nothing(world, url, settings):
    settings.BRAIN_WEBHOOK_ALLOW_HOSTS = []
    response = world.client("admin").post(
        "/api/webhooks", {"url": url, "events": ["memory.written"], "secret": SECRET}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "BRAIN_WEBHOOK_ALLOW_HOSTS" in response.json()["fields"]["url"][0]
    assert not Webhook.objects.exists() and not AuditEvent.objects.filter(action="webhook.created").exists()


def test_a_host_allowed_by_name_is_reached_and_checked_again_at_each_delivery(
    world, receiver_factory, settings
):
    receiver = receiver_factory(200)
    _register(world, receiver.url)  # 127.0.0.1 is allowed (the fixture above)
    factory.make_memory(world.copilot, "first", store="shared")
    fanout()
    assert deliveries_send()["delivered"] == 1 and len(receiver.requests) == 1
    settings.BRAIN_WEBHOOK_ALLOW_HOSTS = []  # no longer allowed: the next delivery is refused, not sent
    factory.make_memory(world.copilot, "second", store="shared")
    fanout()
    deliveries_send()
    refused = WebhookDelivery.objects.order_by("-id").first()
    assert refused.state == "pending" and refused.last_status is None
    assert refused.last_error.startswith("Refused: 127.0.0.1 resolves to 127.0.0.1, a loopback address")
    assert len(receiver.requests) == 1


def test_the_console_refuses_an_internal_webhook_with_the_reason(world, client, settings):
    settings.BRAIN_WEBHOOK_ALLOW_HOSTS = []
    client.force_login(world.admin)
    response = client.post(
        "/webhooks/",
        {"url": "http://169.254.169.254/latest/", "events": ["memory.written"], "secret": SECRET},
        follow=True,
    )
    assert response.status_code == 200 and b"a cloud metadata address" in response.content
    assert not Webhook.objects.exists()
