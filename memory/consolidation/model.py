"""The light model as consolidation uses it, governed and budgeted (`ModelGate`): merging
near-duplicates, summarising, the conflict arbiter; and the embedder the near-duplicate step
compares vectors with."""

from typing import TYPE_CHECKING

from knowledge.llm import (
    LIGHT,
    ModelError,
    ModelOutputInvalid,
    fits,
    model_ask,
    model_availability,
    outage,
    reply_budget,
)
from knowledge.models import Agent
from memory.matching import rules

if TYPE_CHECKING:
    from memory.consolidation.find import Findings

ARBITER_SYSTEM = (
    "You settle a conflict in an AI agent's long-term memory. Several memories give different "
    "values for the same key. Pick the one that is most likely correct now, judging by what each "
    'says, its sources, its confidence and its date. Reply with JSON: {"winner": <id>, "reason": "<why>"}.'
)
MERGE_SYSTEM = (
    "You consolidate an AI agent's long-term memory. The numbered memories below say nearly the "
    "same thing. Write ONE statement that keeps every distinct fact from all of them (names, "
    "numbers, dates, conditions), adds nothing that is not in them, and drops only repetition. "
    'Reply with JSON: {"text": "<the merged statement>"}.'
)
EXAMPLES = ("<the merged statement>", "<the summary>", "the merged statement", "the summary")
SUMMARY_SYSTEM = (
    "You consolidate an AI agent's long-term memory. Summarise the numbered memories below into "
    "ONE memory that keeps every fact that may still matter, adds nothing that is not in them, "
    'and is as short as that allows. Reply with JSON: {"text": "<the summary>"}.'
)
TEXT_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 8000, "pattern": r"\S"}},
    "required": ["text"],
    "additionalProperties": False,
}
REPLY_TOKENS = 1500


class ModelGate:
    """The light model as one run uses it: stop after the first unavailability (so a dead
    endpoint is not retried for every group), skip an agent that is over its own budget, skip a
    group whose output is invalid, and say why in the run's notes. An outage (the server does
    not answer) also sets `deferred`: the run asks for its model work again later."""

    def __init__(self, findings: "Findings", *, actor, limit: int):
        self.findings = findings
        self.actor = actor
        self.limit = limit
        self.calls = 0
        self.deferred = outage(profile=LIGHT)
        self.stopped = self.deferred or model_availability(LIGHT)
        self.blocked_agents: set[int] = set()
        self._agents: dict[int, Agent] = {}

    def usable(self, owner_id: int) -> bool:
        return not self.stopped and owner_id not in self.blocked_agents and self.calls < self.limit

    def _agent(self, owner_id):
        if owner_id not in self._agents:
            self._agents[owner_id] = Agent.objects.get(pk=owner_id)
        return self._agents[owner_id]

    def ask(self, *, owner_id: int, purpose: str, messages: list[dict], schema: dict, check=None):
        """The reply's data, or None (unusable, invalid or refused by `check`, noted)."""
        if not self.usable(owner_id):
            return None
        agent = self._agent(owner_id)
        tokens = reply_budget(REPLY_TOKENS, LIGHT, agent=agent)
        if not fits(messages, tokens, LIGHT, agent=agent):
            self.findings.notes.append(
                f"{purpose}: skipped one group (too long for the light model's context)"
            )
            return None
        self.calls += 1
        try:
            reply = model_ask(
                purpose=purpose,
                messages=messages,
                schema=schema,
                profile=LIGHT,
                agent=agent,
                actor=self.actor,
                max_tokens=tokens,
                check=check,
            )
        except ModelOutputInvalid as exc:
            self.calls += len(exc.usage_ids) - 1 if exc.usage_ids else 0
            self.findings.counts["model_invalid_outputs"] += 1
            self.findings.notes.append(f"{purpose}: skipped one group ({exc.reason})")
            return None
        except ModelError as exc:
            if outage(exc):
                self.stopped = self.deferred = exc.reason
            elif exc.reason.startswith("over budget: agent "):
                self.blocked_agents.add(owner_id)
                self.findings.notes.append(f"{purpose}: {exc.reason}")
            else:
                self.stopped = exc.reason
            return None
        self.calls += len(reply.usage_ids) - 1
        return reply.data

    def arbitrate(self, owner_id, key, members, info, kinds):
        lines = [
            f"#{i} ({info[i]['created_at']:%Y-%m-%d}, confidence {info[i]['confidence']:.2f}, "
            f"sources: {', '.join(sorted(set(kinds[i]))) or 'none'}): {info[i]['text']}"
            + (f" value={info[i]['value']!r}" if info[i]["value"] is not None else "")
            for i in members
        ]
        schema = {
            "type": "object",
            "properties": {
                "winner": {"enum": list(members)},
                "reason": {"type": "string", "maxLength": 1000},
            },
            "required": ["winner", "reason"],
            "additionalProperties": False,
        }
        data = self.ask(
            owner_id=owner_id,
            purpose="consolidation.arbiter",
            messages=[
                {"role": "system", "content": ARBITER_SYSTEM},
                {"role": "user", "content": f"Key: {key}\n" + "\n".join(lines)},
            ],
            schema=schema,
        )
        if data is None:
            return None
        return data["winner"], f"arbiter: {data.get('reason', '')}"[:1000]

    def merge(self, owner_id: int, texts: list[str], *, purpose: str, system: str, summary: bool = False):
        """One statement for `texts` from the model, passing the rules (memory.matching.
        rules): a merge must keep every original, a summary may name nothing its sources do not;
        neither may be the prompt's example. None when there is none."""

        def check(data):
            if summary:
                return rules.summary_breach(data["text"], texts, examples=EXAMPLES, every_claim=True)
            return rules.merge_breach(data["text"], texts, examples=EXAMPLES, vectors=embed())

        data = self.ask(
            owner_id=owner_id,
            purpose=purpose,
            messages=_merge_prompt(texts, system),
            schema=TEXT_SCHEMA,
            check=check,
        )
        return None if data is None else data["text"].strip()

    def fits(self, owner_id: int, texts: list[str], system: str) -> bool:
        agent = self._agent(owner_id)
        return fits(
            _merge_prompt(texts, system), reply_budget(REPLY_TOKENS, LIGHT, agent=agent), LIGHT, agent=agent
        )


def _merge_prompt(texts: list[str], system: str) -> list[dict]:
    numbered = "\n".join(f"{n}. {t}" for n, t in enumerate(texts, 1))
    return [{"role": "system", "content": system}, {"role": "user", "content": numbered}]


def embed():
    """The local embedder for the merge rule, or None when vectors are off."""
    from knowledge.embeddings import embedder

    if not embedder.enabled():
        return None
    return lambda texts: embedder.embed_texts(texts)
