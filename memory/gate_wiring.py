"""How the gate reaches context compilation and the governed model client. (Wired to the
recall and model modules when they land.)"""

from memory.gate import GateUnavailable


def compile_context_text(*, agent, q: str, candidate, with_candidate: bool) -> str:
    raise GateUnavailable("context compilation is not available")


def ask_agent(*, agent, messages: list[dict], purpose: str) -> str:
    raise GateUnavailable("no model is configured")
