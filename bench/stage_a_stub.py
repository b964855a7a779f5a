"""A stand-in for the light model in stage A benchmarks: the loopback model server (tests/model_stub)
answering with an extractive cut of each batch. It is not a language model: it groups messages
that follow each other within GAP_MINUTES in the same thread into one episode, names the topic
after the first message, uses the messages' own text as the summary, the first question as the
likely question and the last message as the resolution, and lists code-like words (AUTH-7731,
vpn-profile) as systems. It never declares noise and leaves nothing unfinished — so it exercises
the plumbing (batches, validation, writes, the vectors of episodes, recall's episode route and
expansion), not the quality a real model's summaries would have.

Its usage figures are what Brain's own token counter (knowledge.tokens) counts in the prompt and
the reply, so "prompt tokens" are an estimate of what a real endpoint would bill."""

import json
import re
from datetime import datetime, timedelta

from knowledge.tokens import count_tokens

GAP_MINUTES = 30
DAY = re.compile(r"^\[(\d{4}-\d\d-\d\d)\]$")
LINE = re.compile(r"^#(\d+) (\d\d:\d\d) ([^:(]+?)(?: \(thread ([^)]*)\))?: (.*)$")
CODE = re.compile(r"\b(?:[A-Z]{2,}-\d+|[a-z]+-[a-z0-9-]+\.\w+|[A-Z]\d{3,})\b")


def cut(prompt_text: str) -> dict:
    rows, day = [], "2000-01-01"
    for raw in prompt_text.splitlines():
        if d := DAY.match(raw):
            day = d[1]
        elif m := LINE.match(raw):
            rows.append(
                (int(m[1]), datetime.strptime(f"{day} {m[2]}", "%Y-%m-%d %H:%M"), m[3], m[4] or "", m[5])
            )
    groups: list[list[tuple]] = []
    open_by_thread: dict[str, list[tuple]] = {}
    for row in rows:
        _, ts, _, thread, _ = row
        group = open_by_thread.get(thread)
        if group is None or ts - group[-1][1] > timedelta(minutes=GAP_MINUTES):
            group = []
            groups.append(group)
            open_by_thread[thread] = group
        group.append(row)
    episodes = []
    for group in groups:
        texts = [r[4] for r in group]
        question = next((t for t in texts if t.rstrip().endswith("?")), texts[0])
        summary = " ".join(f"{r[2]}: {r[4]}" for r in group)[:3000]
        systems = sorted({c for t in texts for c in CODE.findall(t)})[:20]
        resolution = texts[-1][:1500] if len(group) > 1 else ""
        episodes.append(
            {
                "topic": " ".join(texts[0].split()[:10])[:300] or "message",
                "summary": summary or "message",
                "likely_question": question[:1000],
                "resolution": resolution,
                "systems": systems,
                "messages": [r[0] for r in group],
                "evidence": [group[-1][0]] if resolution else [],
            }
        )
    return {"episodes": episodes, "noise": [], "leave_from": None}


def respond(body: dict) -> dict:
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    content = json.dumps(cut(prompt))
    prompt_tokens, completion_tokens = count_tokens(prompt), count_tokens(content)
    return {
        "content": content,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def start():
    """The loopback server answering every chat call with `respond`, and the settings that
    point the light profile at it (apply them with override_settings)."""
    from tests.model_stub import ModelStub

    stub = ModelStub()
    stub.respond_with(respond)
    settings = {
        "BRAIN_MODEL_BASE_URL": stub.url,
        "BRAIN_MODEL": "stub-model",
        "BRAIN_MODEL_LIGHT": "stub-light",
        "BRAIN_MODEL_API_KEY": "",
        "BRAIN_MODEL_RETRY_BACKOFF_SECONDS": 0,
        "BRAIN_MODEL_DAILY_CALLS": 1_000_000,
        "BRAIN_MODEL_DAILY_TOKENS": 1_000_000_000,
    }
    return stub, settings
