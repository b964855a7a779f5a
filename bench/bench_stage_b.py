"""Dreaming stage B over 1,000 episodes for one agent, with the loopback model server standing in
for the light model (a scripted curator, not a language model: it picks every episode it is
shown and the entries its topics name, then writes one block per episode into the entry of the
person it is about — creating the entry the first time, and closing that entry's open block
every third time, so closes, creates and blocks all go through the real services). Reports runs,
model calls, prompt tokens per episode, Brain's own seconds per 100 operations (wall time minus
the time waiting for the model) and the write transaction (operations + commit) of the largest
run."""

import json
import re
import time
from datetime import UTC, datetime, timedelta

from django.db.models import Sum
from django.test.utils import override_settings

from curation.dreaming.stage_b.rules import SCAN_SCHEMA
from knowledge.tokens import count_tokens

EPISODES = 1000
PEOPLE = 40
FOODS = ["barbecue", "sushi", "salads", "curry", "pasta", "tacos", "vegetarian food", "ramen"]
EPISODE_LINE = re.compile(r"^\[episode #(\d+) in [^:]+: (Person \d+)'s food\]$")
MESSAGE_LINE = re.compile(r"^#(\d+) ")
ENTRY_LINE = re.compile(r"^#(\d+) (Person \d+) \(")
BLOCK_LINE = re.compile(r"^  \[block #(\d+), [a-z]+, [^–]+ – (\S+)\]")


def seed():
    from knowledge.conversations import services as messages
    from knowledge.models import Agent, Episode, Message
    from knowledge.principal import Principal

    actor = Principal.system("bench")
    agent = Agent.objects.create(name="bench-curator", trusted=True)
    channel = messages.channel_create(actor=actor, name="bench-stage-b")
    messages.conversation_start(actor=actor, agent=agent, channel=channel)
    start = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)
    rows = [
        messages.MessageIn(
            channel=channel,
            speaker=f"person{i % PEOPLE}",
            text=f"Person {i % PEOPLE} says: these days I mostly eat {FOODS[i % len(FOODS)]}.",
            ts=start + timedelta(hours=6 * i),
            external_id=f"sb-{i}",
        )
        for i in range(EPISODES)
    ]
    ids = []
    for i in range(0, len(rows), 500):
        ids += messages.message_ingest(actor=actor, messages=rows[i : i + 500]).ids
    episodes = Episode.objects.bulk_create(
        [
            Episode(
                channel=channel,
                store=m.store,
                topic=f"Person {n % PEOPLE}'s food",
                summary=m.text,
                start_ts=m.ts,
                end_ts=m.ts,
            )
            for n, m in enumerate(Message.objects.filter(pk__in=ids).order_by("ts", "id"))
        ]
    )
    for episode, mid in zip(episodes, ids, strict=True):
        Message.objects.filter(pk=mid).update(episode=episode)
    return agent


def _scan(prompt: str) -> dict:
    episodes = [int(m[1]) for m in re.finditer(r"^#(\d+) \d{4}-\d\d-\d\d ", prompt, re.M)]
    topics = set(re.findall(r"(Person \d+)'s food", prompt))
    entries = [int(m[1]) for m in re.finditer(r"^#(\d+) (Person \d+) \(", prompt, re.M) if m[2] in topics]
    # As a model bound by the scan schema must: at most its maxItems ids per list, first listed first.
    cap = SCAN_SCHEMA["properties"]["entries"]["maxItems"]
    return {"episodes": episodes[:cap], "outcomes": [], "entries": entries[:cap]}


def _propose(prompt: str) -> dict:
    entries, open_block, current = {}, {}, None
    for line in prompt.splitlines():
        if m := ENTRY_LINE.match(line):
            current = m[2]
            entries[current] = int(m[1])
        elif (m := BLOCK_LINE.match(line)) and current and m[2] == "…":
            open_block[current] = int(m[1])
    ops, created, episode, topic, seen = [], set(), None, None, 0
    for line in prompt.splitlines():
        if m := EPISODE_LINE.match(line):
            episode, topic = int(m[1]), m[2]
        elif (m := MESSAGE_LINE.match(line)) and episode is not None:
            seen += 1
            day = re.search(r"#\d+ (\d{4}-\d\d-\d\d)", line)[1]
            ref = entries.get(topic, topic)
            if topic not in entries and topic not in created:
                ops.append({"op": "create_entry", "name": topic, "type": "person", "store": "shared"})
                created.add(topic)
            op = {
                "op": "add_block",
                "entry": ref,
                "text": line.split(": ", 1)[-1][:200],
                "kind": "observation",
                "sources": [{"kind": "episode", "ref": episode}],
                "valid_from": day,
            }
            if isinstance(ref, int) and topic in open_block and seen % 3 == 0:
                op["closes"] = open_block.pop(topic)
            ops.append(op)
            episode = None
    return {"operations": ops}


def respond(body: dict) -> dict:
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    data = _scan(prompt) if "Pick only" in prompt else _propose(prompt)
    content = json.dumps(data)
    p, c = count_tokens(prompt), count_tokens(content)
    return {"content": content, "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}}


def run(report):
    from bench import stage_a_stub
    from curation.dreaming.stage_b import services as services_b
    from curation.models import DreamingRun
    from knowledge.models import Memory, ModelUsage

    with override_settings(BRAIN_EMBEDDING_KICK=False):
        agent = seed()
    stub, model_settings = stage_a_stub.start()
    stub.respond_with(respond)
    writes: list[tuple[int, float]] = []
    apply = services_b._apply

    def timed(run_, *args, **kwargs):
        start = time.perf_counter()
        try:
            return apply(run_, *args, **kwargs)
        finally:
            writes.append((run_.pk, time.perf_counter() - start))

    services_b._apply = timed
    try:
        with override_settings(BRAIN_EMBEDDING_KICK=False, **model_settings):
            usage_before = ModelUsage.objects.count()
            start = time.perf_counter()
            runs = []
            while True:
                r = services_b.stage_b_run(agent=agent, trigger=DreamingRun.MANUAL)
                assert r.state == DreamingRun.DONE, r.reason
                if r.reason == "nothing new since the last run":
                    r.delete()
                    break
                runs.append(r)
            wall = time.perf_counter() - start
    finally:
        services_b._apply = apply
        stub.close()
    usage = ModelUsage.objects.filter(pk__in=ModelUsage.objects.order_by("id").values("pk")[usage_before:])
    totals = usage.aggregate(prompt=Sum("prompt_tokens"), wait=Sum("latency_ms"))
    runs = [DreamingRun.objects.get(pk=r.pk) for r in runs]
    ops = sum(r.operations for r in runs)
    dropped = sum(len(r.dropped) for r in runs)
    calls = sum(r.model_calls for r in runs)
    blocks = Memory.objects.filter(owner=agent, entry__isnull=False).count()
    closed = Memory.objects.filter(owner=agent, entry__isnull=False, valid_to__isnull=False).count()
    own = wall - (totals["wait"] or 0) / 1000
    largest = max(runs, key=lambda r: r.operations)
    commit = dict(writes)[largest.pk]
    report(
        "stage B runs (1,000 episodes, one agent)",
        len(runs),
        "runs",
        note=f"{ops:,} operations, {dropped} dropped",
    )
    report("stage B model calls", calls, "calls", note="one scan and one propose call per run")
    report(
        "stage B prompt tokens per episode",
        (totals["prompt"] or 0) / EPISODES,
        "tokens",
        note="Brain's token counter; scan + propose",
    )
    report(
        "stage B Brain time per 100 operations",
        own / ops * 100,
        "s",
        note=f"wall {wall:.1f} s minus {(totals['wait'] or 0) / 1000:.1f} s waiting for the model",
    )
    report(
        "stage B write transaction of the largest run",
        commit * 1000,
        "ms",
        note=f"{largest.operations} operations applied and committed; {blocks} blocks, {closed} closed",
    )
