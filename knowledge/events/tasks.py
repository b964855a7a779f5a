"""django-q2 entry point: every minute, queue new events for each webhook and send what is due
(first tries and retries whose back-off has passed)."""

from knowledge.events.services import deliveries_send, webhooks_fanout


def webhooks_run() -> dict:
    queued = webhooks_fanout()
    return {"queued": queued, **deliveries_send()}
