"""How the gate reaches context compilation and the governed model client."""

from knowledge.llm import ModelError, model_call
from knowledge.principals.principal import Principal
from memory.gate.services import GateUnavailable
from memory.recall.context import context_compile, context_text
from memory.recall.scope import store_scope

GATE_BUDGET_TOKENS = 2000


def gate_context(*, agent, q: str, candidate, with_candidate: bool) -> dict:
    """The context the agent gets for a gate case's turn in the candidate's store: the candidate
    left out of recall (even when it is already active), or placed first in recalled memory
    exactly as recall places a memory."""
    return context_compile(
        store_scope(agent, candidate.store),
        q=q,
        budget_tokens=GATE_BUDGET_TOKENS,
        exclude_memory_ids=[candidate.pk],
        include_memories=[candidate] if with_candidate else [],
    )


def compile_context_text(*, agent, q: str, candidate, with_candidate: bool) -> str:
    return context_text(gate_context(agent=agent, q=q, candidate=candidate, with_candidate=with_candidate))


def ask_agent(*, agent, messages: list[dict], purpose: str) -> str:
    """One governed call of the agent's own model profile; any failure means the check could
    not run."""
    try:
        return model_call(
            purpose=purpose, messages=messages, agent=agent, actor=Principal.system("eval-gate")
        ).text
    except ModelError as exc:
        raise GateUnavailable(exc.reason)
