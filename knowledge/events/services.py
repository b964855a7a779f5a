"""Webhooks: registering them, queueing each new feed event as a delivery, and sending
deliveries signed, with retries that back off.

A webhook's cursor is a feed position; `webhooks_fanout` reads the feed after it (as a system
principal: webhooks are an admin's, and admins see every store), writes one delivery per event
of the types the webhook asked for and moves the cursor, in one transaction per webhook — so
every event is queued exactly once (the unique (webhook, cursor) constraint says so too) even if
the worker dies between runs. `deliveries_send` claims due deliveries with a conditional update,
so two workers never send the same one at once."""

import datetime
import hashlib
import hmac
import http.client
import json
import socket
import ssl
import time

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.errors import Invalid
from knowledge.events.destinations import destination_check
from knowledge.events.feed import feed_head, feed_read
from knowledge.models import Webhook, WebhookDelivery
from knowledge.principal import ADMIN, Principal

SIGNATURE_HEADER = "X-Brain-Signature"
FANOUT_BATCH = 500
SEND_BATCH = 50
SEND_SECONDS = 45.0  # per run of the every-minute schedule
CLAIM_TIMEOUT = datetime.timedelta(minutes=5)  # a claim older than this is a dead worker's
ERROR_CHARS = 500


def sign(secret: str, body: bytes) -> str:
    """The X-Brain-Signature header value: `sha256=` and the hex HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def backoff(attempts: int) -> datetime.timedelta:
    """The wait after the `attempts`-th failed try: BRAIN_WEBHOOK_RETRY_SECONDS, doubling, at
    most six hours."""
    seconds = settings.BRAIN_WEBHOOK_RETRY_SECONDS * 2 ** max(attempts - 1, 0)
    return datetime.timedelta(seconds=min(seconds, 6 * 3600))


def webhook_create(*, actor: Principal, url: str, events: list[str], secret: str) -> Webhook:
    """Register a webhook for `events`; it receives events committed from now on (its cursor
    starts at the feed's head). Audited without the secret. The URL must lead to a public
    address (knowledge.events.destinations) unless its host is allowed by name."""
    access.require_role(actor, ADMIN, "Only admins manage webhooks.")
    destination_check(url)
    with transaction.atomic():
        webhook = Webhook.objects.create(
            url=url,
            events=sorted(set(events)),
            secret=secret,
            created_by=f"{actor.kind_label}:{actor.name}",
            cursor=feed_head(),
        )
        audit_record(
            "webhook.created",
            actor=actor,
            object_type="webhook",
            object_ids=[webhook.pk],
            data={"url": url, "events": webhook.events},
        )
    return webhook


def webhook_delete(*, actor: Principal, webhook: Webhook) -> None:
    """Remove a webhook and its delivery log."""
    access.require_role(actor, ADMIN, "Only admins manage webhooks.")
    with transaction.atomic():
        audit_record(
            "webhook.deleted",
            actor=actor,
            object_type="webhook",
            object_ids=[webhook.pk],
            data={"url": webhook.url, "events": webhook.events},
        )
        webhook.delete()


def event_body(event: dict) -> str:
    return json.dumps(event, cls=DjangoJSONEncoder, sort_keys=True, separators=(",", ":"))


def webhooks_fanout(*, now: datetime.datetime | None = None) -> int:
    """Queue a delivery for every new feed event each active webhook asked for. Returns how many
    were queued. A webhook another worker is fanning out is skipped (SKIP LOCKED)."""
    now = now or timezone.now()
    reader = Principal.system("webhooks")
    queued = 0
    for pk in Webhook.objects.filter(active=True).values_list("pk", flat=True):
        while True:
            with transaction.atomic():
                webhook = (
                    Webhook.objects.select_for_update(skip_locked=True).filter(pk=pk, active=True).first()
                )
                if webhook is None:
                    break
                page = feed_read(reader, after=webhook.cursor, limit=FANOUT_BATCH, types=webhook.events)
                WebhookDelivery.objects.bulk_create(
                    [
                        WebhookDelivery(
                            webhook=webhook,
                            cursor=event["cursor"],
                            event_type=event["type"],
                            memory_id=event["memory"],
                            body=event_body(event),
                            next_attempt_at=now,
                        )
                        for event in page.events
                    ],
                    ignore_conflicts=True,
                )
                queued += len(page.events)
                if page.next_cursor != webhook.cursor:
                    webhook.cursor = page.next_cursor
                    webhook.save(update_fields=["cursor"])
            if not page.has_more:
                break
    return queued


def _post(url: str, body: bytes, headers: dict) -> tuple[int | None, str]:
    """POST once: (HTTP status or None, error text; empty when the status was 2xx). The URL is
    checked again first (knowledge.events.destinations) and the connection made to the address
    that passed, so a name pointed inside the network since registration is refused, not
    followed; redirects are not followed either (a 3xx is the answer)."""
    try:
        target = destination_check(url)
    except Invalid as exc:
        return None, f"Refused: {exc.fields['url'][0]}"[:ERROR_CHARS]
    timeout = settings.BRAIN_WEBHOOK_TIMEOUT_SECONDS
    if target.scheme == "https":
        connection = http.client.HTTPSConnection(
            target.host, target.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    # Connect to the checked address; TLS still verifies the certificate for the host name.
    connection._create_connection = lambda address, *args: socket.create_connection(
        (target.address, address[1]), *args
    )
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        status, reason = response.status, response.reason
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
    finally:
        connection.close()
    if 200 <= status < 300:
        return status, ""
    return status, f"HTTP {status} {reason}"[:ERROR_CHARS]


def delivery_send(delivery: WebhookDelivery, *, now: datetime.datetime | None = None) -> bool:
    """Send one claimed delivery and record the outcome: delivered on 2xx; otherwise pending
    again after the back-off, or failed after BRAIN_WEBHOOK_MAX_ATTEMPTS tries."""
    webhook = delivery.webhook
    body = delivery.body.encode()
    status, error = _post(
        webhook.url,
        body,
        {
            "Content-Type": "application/json",
            "User-Agent": "brain-webhooks/1",
            SIGNATURE_HEADER: sign(webhook.secret, body),
            "X-Brain-Event": delivery.event_type,
            "X-Brain-Delivery": str(delivery.pk),
            "X-Brain-Cursor": delivery.cursor,
        },
    )
    now = now or timezone.now()
    ok = status is not None and 200 <= status < 300
    delivery.attempts += 1
    delivery.last_status, delivery.last_error, delivery.claimed_at = status, error, None
    if ok:
        delivery.state, delivery.delivered_at = WebhookDelivery.DELIVERED, now
    elif delivery.attempts >= settings.BRAIN_WEBHOOK_MAX_ATTEMPTS:
        delivery.state = WebhookDelivery.FAILED
    else:
        delivery.state = WebhookDelivery.PENDING
        delivery.next_attempt_at = now + backoff(delivery.attempts)
    WebhookDelivery.objects.filter(pk=delivery.pk, state=WebhookDelivery.SENDING).update(
        state=delivery.state,
        attempts=delivery.attempts,
        last_status=status,
        last_error=error,
        claimed_at=None,
        delivered_at=delivery.delivered_at,
        next_attempt_at=delivery.next_attempt_at,
    )
    return ok


def deliveries_send(
    *, now: datetime.datetime | None = None, limit: int = SEND_BATCH, max_seconds: float = SEND_SECONDS
) -> dict:
    """Send the deliveries that are due (oldest first), batch after batch until none is due or
    `max_seconds` have passed (the schedule runs every minute), each claimed first with a
    conditional update. A delivery claimed longer than CLAIM_TIMEOUT ago is a dead worker's and
    due again. Returns counts of delivered and failed tries."""
    now = now or timezone.now()
    started = time.monotonic()
    WebhookDelivery.objects.filter(state=WebhookDelivery.SENDING, claimed_at__lt=now - CLAIM_TIMEOUT).update(
        state=WebhookDelivery.PENDING
    )
    counts = {"delivered": 0, "retrying_or_failed": 0}
    tried: set[int] = set()
    while time.monotonic() - started < max_seconds:
        due = list(
            WebhookDelivery.objects.filter(
                state=WebhookDelivery.PENDING, next_attempt_at__lte=now, webhook__active=True
            )
            .exclude(pk__in=tried)
            .order_by("next_attempt_at", "id")
            .values_list("pk", flat=True)[:limit]
        )
        if not due:
            break
        for pk in due:
            tried.add(pk)  # a try that failed is due again only after its back-off, in a later run
            claimed = WebhookDelivery.objects.filter(pk=pk, state=WebhookDelivery.PENDING).update(
                state=WebhookDelivery.SENDING, claimed_at=timezone.now()
            )
            if not claimed:
                continue
            delivery = WebhookDelivery.objects.select_related("webhook").get(pk=pk)
            delivery.state = WebhookDelivery.SENDING
            if delivery_send(delivery, now=now):
                counts["delivered"] += 1
            else:
                counts["retrying_or_failed"] += 1
            if time.monotonic() - started >= max_seconds:
                break
    return counts


def webhooks_with_counts():
    """Every webhook with its deliveries counted by state (the console and GET /api/webhooks)."""
    return Webhook.objects.annotate(
        n_pending=Count(
            "deliveries", filter=Q(deliveries__state__in=[WebhookDelivery.PENDING, WebhookDelivery.SENDING])
        ),
        n_delivered=Count("deliveries", filter=Q(deliveries__state=WebhookDelivery.DELIVERED)),
        n_failed=Count("deliveries", filter=Q(deliveries__state=WebhookDelivery.FAILED)),
    ).order_by("id")
