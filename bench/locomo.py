"""The public LoCoMo development split (`../shared/data/locomo-dev/locomo-dev.json` beside the
repository): long two-person conversations over months, each question labelled with the turns
that answer it. It is evaluation data only and never ships with the product; when the file is
absent the bench says so and skips it.

Loaded exactly as its README's protocol says: one conversation = one channel-only channel, one
session = one thread, each turn a message with its speaker, its text (plus " [image: <caption>]"
when the turn shares an image), external_id "<sample_id>:<dia_id>" and the session's start time
plus one minute per turn, posted through POST /api/messages. Questions of categories 1–4 only;
an evidence id that is not a dia_id of its conversation is dropped (not repaired); a question left
without evidence is skipped. Each question is searched in its conversation's channel with `now`
= the last turn + 1 minute."""

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rest_framework.test import APIClient

from bench.recall_eval import Case
from bench.recall_seed import ACTOR, agent
from knowledge.conversations import services as messages
from knowledge.models import Channel, Integration, Message
from knowledge.principals import services
from memory.recall import resolve_scope

ROOT = Path(__file__).resolve().parent.parent
PATH = ROOT.parent / "shared" / "data" / "locomo-dev" / "locomo-dev.json"
SESSION_KEY = re.compile(r"^session_(\d+)$")


def available() -> bool:
    return PATH.exists()


def _session_start(text: str) -> datetime:
    # e.g. "1:56 pm on 8 May, 2023"; times are read as UTC
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _turns(sample: dict):
    """(session number, session start, turn index, turn) in order."""
    conv = sample["conversation"]
    numbers = sorted(int(m.group(1)) for key in conv if (m := SESSION_KEY.match(key)))
    for n in numbers:
        start = _session_start(conv[f"session_{n}_date_time"])
        for i, turn in enumerate(conv[f"session_{n}"]):
            yield n, start, i, turn


def load(samples=None) -> tuple[list[Case], dict]:
    """Post every conversation through the API and return the evaluation cases, plus a label map:
    message id -> (external_id, session label). Each turn names its own speaker, so a
    conversation may have any number of them (speaker_a / speaker_b are not read)."""
    data = samples if samples is not None else json.loads(PATH.read_text())
    bot = agent("locomo-reader")
    integration = Integration.objects.filter(name="locomo").first() or services.integration_create(
        actor=ACTOR, name="locomo"
    )
    raw = services.token_create(actor=ACTOR, integration=integration)
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    cases: list[Case] = []
    for sample in data:
        sid = sample["sample_id"]
        channel = messages.channel_open(
            actor=ACTOR,
            name=f"locomo-{sid}",
            memory_scope=Channel.SCOPE_CHANNEL,
            integrations=[integration],
        )
        conversation = messages.conversation_start(actor=ACTOR, agent=bot, channel=channel)
        rows, dia_ids, last = [], set(), None
        for n, start, i, turn in _turns(sample):
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            # A turn may carry its own time (the chat set's messages do); LoCoMo's get a minute each.
            ts = datetime.fromisoformat(turn["ts"]) if turn.get("ts") else start + timedelta(minutes=i + 1)
            last = ts if last is None or ts > last else last
            dia_ids.add(turn["dia_id"])
            rows.append(
                {
                    "channel": channel.name,
                    "thread": f"session-{n}",
                    "speaker": turn["speaker"],
                    "text": text,
                    "ts": ts.isoformat(),
                    "external_id": f"{sid}:{turn['dia_id']}",
                }
            )
        for begin in range(0, len(rows), 1000):
            response = client.post("/api/messages", {"messages": rows[begin : begin + 1000]}, format="json")
            assert response.status_code == 201, response.content[:500]
        scope = resolve_scope(ACTOR, agent=bot, conversation=conversation)
        now = last + timedelta(minutes=1)
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            evidence = [e for e in qa.get("evidence", []) if e in dia_ids]
            if not evidence:
                continue
            cases.append(
                Case(
                    q=qa["question"],
                    evidence=[f"{sid}:{e}" for e in evidence],
                    scope=scope,
                    now=now,
                    type=f"category {qa['category']}",
                    group=sid,
                )
            )
    labels = {}
    for pk, ext in Message.objects.filter(channel__name__startswith="locomo-").values_list(
        "pk", "external_id"
    ):
        labels[("message", pk)] = ext
    return cases, labels


def session_of(label: str) -> str:
    """'conv-26:D3:7' -> 'conv-26:D3'."""
    return label.rsplit(":", 1)[0] if label.count(":") >= 2 else label
