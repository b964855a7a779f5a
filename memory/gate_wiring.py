"""How the gate reaches context compilation and the governed model client."""

from knowledge.llm import ModelError, model_call
from knowledge.principals import Principal
from memory.gate import GateUnavailable


def compile_context_text(*, agent, q: str, candidate, with_candidate: bool) -> str:
    raise GateUnavailable("context compilation is not available")


def ask_agent(*, agent, messages: list[dict], purpose: str) -> str:
    """One governed call of the agent's own model profile; any failure means the check could
    not run."""
    try:
        return model_call(
            purpose=purpose, messages=messages, agent=agent, actor=Principal.system("eval-gate")
        ).text
    except ModelError as exc:
        raise GateUnavailable(exc.reason)
