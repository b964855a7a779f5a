"""Context compilation with the history section on: POST /api/agents/{agent}/context for an
agent in a conversation whose channel gets one new turn before every call, with history on
(the last 4 turns verbatim and the rolling summary, advanced by the turn that left the window;
no model configured, so the extractive fold) against the same call with `history_turns` 0, in
one run, alternately, same questions.

Recalled memory reads 2,000 shared memories (embedded by the backlog job); the channel starts
with 300 turns, folded by the warm-up calls."""

import datetime
import random
import statistics
import time

from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from bench.recall_seed import ACTOR, agent, analyze, bulk_memories, reset_recall_tables
from bench.textgen import TextGen, question
from knowledge.conversations import services as messages
from knowledge.embeddings.backlog import run_backlog
from knowledge.principals import services
from memory.models import ConversationSummary

MEMORIES = 2_000
START_TURNS = 300
QUERIES = 300
WARMUP = 10
BUDGET = 4_000
SPEAKERS = ["ana", "bruno", "context-history"]


def _p95(values):
    values = sorted(values)
    return values[int(len(values) * 0.95) - 1]


def run(report):
    gen = TextGen(2031)
    rng = random.Random(2031)
    reset_recall_tables()
    owner, me = agent("history-owner"), agent("context-history")
    channel = messages.channel_open(actor=ACTOR, name="history-bench")
    conversation = messages.conversation_start(actor=ACTOR, agent=me, channel=channel)
    bulk_memories([{"owner": owner, "store": "shared", "text": gen.message()} for _ in range(MEMORIES)])
    clock = [timezone.now() - datetime.timedelta(days=1)]

    def post_turn():
        clock[0] += datetime.timedelta(seconds=30)
        messages.message_ingest(
            actor=ACTOR,
            messages=[
                messages.MessageIn(
                    channel=channel, speaker=rng.choice(SPEAKERS), text=gen.message(), ts=clock[0]
                )
            ],
        )

    for _ in range(START_TURNS):
        post_turn()
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {services.token_create(actor=ACTOR, agent=me)}")
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        run_backlog(max_seconds=600)
        analyze()
        timings = {"on": [], "off": []}
        statements = []
        for i in range(QUERIES + WARMUP):
            post_turn()
            q = question(gen)
            for mode in rng.sample(["on", "off"], 2):
                body = {
                    "conversation": conversation.pk,
                    "q": q,
                    "budget_tokens": BUDGET,
                    "history_turns": 4 if mode == "on" else 0,
                }
                if i == WARMUP and mode == "on":  # one call's statements, outside the timings
                    with CaptureQueriesContext(connection) as captured:
                        client.post("/api/agents/context-history/context", body, format="json")
                    statements.append(len(captured))
                    post_turn()
                t0 = time.perf_counter()
                response = client.post("/api/agents/context-history/context", body, format="json")
                spent = (time.perf_counter() - t0) * 1000
                assert response.status_code == 200, response.content[:500]
                if i >= WARMUP:
                    timings[mode].append(spent)
    summary = ConversationSummary.objects.get(conversation=conversation)
    # the first call folds the last FOLD_MAX of the starting turns and counts the rest as skipped
    assert summary.turns + summary.skipped == START_TURNS + QUERIES + WARMUP + 1 - 4, summary.turns
    on, off = _p95(timings["on"]), _p95(timings["off"])
    report(
        "context compilation p95 with history on (API)",
        on,
        "ms",
        note=f"{QUERIES} calls, each after one new turn: 4 turns verbatim + rolling extractive summary "
        f"({summary.tokens} tokens, {summary.turns} turns folded, {summary.skipped} skipped); budget {BUDGET:,}, {MEMORIES:,} shared "
        f"memories; p50 {statistics.median(timings['on']):.0f} ms",
    )
    report(
        "context compilation p95 with history on, % of off (API)",
        100 * on / off,
        "%",
        note=f"off (history_turns 0): p95 {off:.0f} ms, p50 {statistics.median(timings['off']):.0f} ms; "
        f"measured alternately, same questions; {statements[0] if statements else '?'} SQL statements "
        "for one call with history",
    )
