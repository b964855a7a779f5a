"""A small support agent that keeps its memory in Brain — the whole cycle in one file.

For each customer question it:
  1. opens a conversation in the support channel (its scope is fixed now),
  2. reports the customer's message,
  3. compiles its context for the turn (instructions, pinned memo, skills, recalled memory),
  4. asks the model (any OpenAI-compatible chat-completions endpoint) for an answer and for
     one fact worth remembering,
  5. reports its answer and how the task went,
  6. writes the fact as a memory whose source is this conversation,
  7. finishes the conversation (Brain's distiller may propose more memories from it).

Run it against `make run` with an agent token (`manage.py createagent helper`):

    BRAIN_URL=http://127.0.0.1:8000 BRAIN_TOKEN=… \\
    MODEL_BASE_URL=https://api.openai.com/v1 MODEL=gpt-4o-mini MODEL_API_KEY=… \\
    .venv/bin/python examples/support_agent.py --channel support --customer alice "VPN error E4012?"

Needs `pip install ./clients/python` (or PYTHONPATH=clients/python).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

import httpx
from brain_client import Brain

SYSTEM = (
    "You are a support agent. Use the context below; do not invent facts. Answer with a JSON "
    'object: {"answer": "<your reply to the customer>", "remember": "<one reusable fact this '
    'conversation established, or an empty string>", "solved": true|false}.'
)


@dataclass
class Turn:
    conversation: int
    answer: str
    memory: int | None
    outcome: int | None


class Model:
    """An OpenAI-compatible chat-completions endpoint."""

    def __init__(self, base_url: str, model: str, api_key: str = "", timeout: float = 60):
        self.http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout)
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def reply(self, system: str, user: str) -> dict:
        response = self.http.post(
            "/chat/completions",
            headers=self.headers,
            json={
                "model": self.model,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                "response_format": {"type": "json_object"},
            },
        )
        response.raise_for_status()
        content = response.json()["choices"][0]["message"]["content"]
        try:
            out = json.loads(content)
        except ValueError:
            out = {"answer": content}
        return out if isinstance(out, dict) else {"answer": str(out)}


def handle(
    brain: Brain,
    model: Model,
    *,
    channel: str,
    customer: str,
    question: str,
    ticket: str,
    skill: str | None = None,
) -> Turn:
    """One customer question, start to finish."""
    conversation = brain.conversations.open(channel)
    try:
        # external_id makes each report safe to retry: Brain stores it once.
        brain.messages.post(channel, customer, question, external_id=f"{ticket}-question")
        context = brain.context(conversation=conversation.id, q=question, budget_tokens=2000)
        reply = model.reply(f"{SYSTEM}\n\n{context.text}", question)
        answer = str(reply.get("answer") or "").strip() or "Let me check and come back to you."
        brain.messages.post(channel, f"agent:{brain.agent}", answer, external_id=f"{ticket}-answer")

        outcome = None
        if skill:
            result = "success" if reply.get("solved") else "failure"
            outcome = brain.skills.outcome(
                skill, f"Answer {ticket}", result, conversation=conversation.id, external_id=ticket
            )["id"]

        memory = None
        fact = str(reply.get("remember") or "").strip()
        if fact:
            memory = brain.memory.write(
                fact,
                scope=conversation.write_store,
                sources=[{"kind": "conversation", "ref": str(conversation.id)}],
                conversation=conversation.id,
            ).id
        return Turn(conversation=conversation.id, answer=answer, memory=memory, outcome=outcome)
    finally:
        brain.conversations.finish(conversation.id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question")
    parser.add_argument("--channel", default="support")
    parser.add_argument("--customer", default="customer")
    parser.add_argument("--ticket", default="ticket-1")
    parser.add_argument("--skill")
    args = parser.parse_args(argv)
    with Brain(os.environ.get("BRAIN_URL", "http://127.0.0.1:8000"), os.environ["BRAIN_TOKEN"]) as brain:
        model = Model(
            os.environ["MODEL_BASE_URL"], os.environ.get("MODEL", ""), os.environ.get("MODEL_API_KEY", "")
        )
        turn = handle(
            brain,
            model,
            channel=args.channel,
            customer=args.customer,
            question=args.question,
            ticket=args.ticket,
            skill=args.skill,
        )
    print(turn.answer)
    print(
        f"(conversation {turn.conversation}, memory {turn.memory}, outcome {turn.outcome})", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
