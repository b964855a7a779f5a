"""Dreaming stage A over 10,000 messages in 10 channels (threads, several speakers), with the
loopback model server cutting each batch (bench/stage_a_stub.py): runs, model calls, prompt
tokens per 1,000 messages, and seconds of Brain's own time per 1,000 messages — the run's wall
time minus the time spent waiting for the model's answers (each call's recorded latency)."""

import random
import time
from datetime import UTC, datetime, timedelta

from django.db.models import Sum
from django.test.utils import override_settings

from bench import stage_a_stub
from bench.textgen import TextGen

TOTAL = 10_000
CHANNELS = 10


def seed():
    from knowledge.conversations import services as messages
    from knowledge.principal import Principal

    actor = Principal.system("bench")
    channels = [messages.channel_create(actor=actor, name=f"bench-stage-a-{n}") for n in range(CHANNELS)]
    rng, gen = random.Random(5), TextGen(5)
    start = datetime(2026, 9, 1, 8, 0, tzinfo=UTC)
    rows = []
    for n, channel in enumerate(channels):
        ts = start
        for i in range(TOTAL // CHANNELS):
            # discussions of a few messages a few minutes apart, hours between them
            ts += timedelta(minutes=rng.choice([1, 2, 3, 5])) if rng.random() < 0.8 else timedelta(hours=5)
            thread = f"t{i // 7}" if rng.random() < 0.2 else ""
            rows.append(
                messages.MessageIn(
                    channel=channel,
                    speaker=gen.speaker(),
                    text=gen.message(),
                    ts=ts,
                    thread=thread,
                    external_id=f"sa-{n}-{i}",
                )
            )
    for i in range(0, len(rows), 1000):
        messages.message_ingest(actor=actor, messages=rows[i : i + 1000])
    return channels


def run(report):
    from curation.dreaming.stage_a.services import stage_a_run
    from curation.models import DreamingRun
    from knowledge.models import Episode, Message, ModelUsage

    with override_settings(BRAIN_EMBEDDING_KICK=False):
        channels = seed()
    stub, model_settings = stage_a_stub.start()
    try:
        with override_settings(BRAIN_EMBEDDING_KICK=False, **model_settings):
            usage_before = ModelUsage.objects.count()
            start = time.perf_counter()
            runs = [stage_a_run(channel=c, trigger=DreamingRun.MANUAL, max_seconds=3600) for c in channels]
            wall = time.perf_counter() - start
    finally:
        stub.close()
    usage = ModelUsage.objects.order_by("id")[usage_before:]
    usage = ModelUsage.objects.filter(pk__in=[u.pk for u in usage])
    totals = usage.aggregate(
        prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"), wait=Sum("latency_ms")
    )
    covered = Message.objects.filter(channel__in=channels, episode__isnull=False).count()
    assert all(r.state == DreamingRun.DONE for r in runs), [r.reason for r in runs if r.reason]
    assert covered == TOTAL, covered
    calls = sum(r.model_calls for r in runs)
    own = wall - (totals["wait"] or 0) / 1000
    per_k = TOTAL / 1000
    report("stage A runs (10,000 messages, 10 channels)", len(runs), "runs", note=f"{calls} batches")
    report("stage A model calls", calls, "calls", note=f"{TOTAL / calls:,.0f} messages per call")
    report(
        "stage A prompt tokens per 1,000 messages",
        (totals["prompt"] or 0) / per_k,
        "tokens",
        note="Brain's token counter; stub model",
    )
    report(
        "stage A reply tokens per 1,000 messages",
        (totals["completion"] or 0) / per_k,
        "tokens",
        note="the stub's extractive reply",
    )
    report(
        "stage A Brain time per 1,000 messages",
        own / per_k,
        "s",
        note=f"wall {wall:.1f} s minus {(totals['wait'] or 0) / 1000:.1f} s waiting for the model",
    )
    report("stage A episodes written", Episode.objects.filter(channel__in=channels).count(), "episodes")
