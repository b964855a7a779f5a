"""The pluggable decisions inside the one activation function (`memory.lifecycle.activation.memory_activate`).

Each hook is a small function so a later capability can replace its body without touching the
activation function itself:

- `gate_before_activation` — the eval gate (memory.gate). In `enforce` mode it holds the memory
  in the queue (reason gate) and queues its check, which memory.lifecycle.gated carries out in
  the background; in `shadow` mode it queues a background check (none while no model is set:
  it could only end "not checked"). It never calls the model.
- `route_goes_active` — who goes into force at once (trusted agents', people's and Dreaming's writes, reviewer approvals), including the
  distiller's auto-activation setting.
"""

import datetime
from dataclasses import dataclass

from knowledge.llm import profile_resolve
from knowledge.memories.activation import ENTRY_BLOCK, entry_block_goes_active
from knowledge.models import Memory
from knowledge.principal import Principal
from knowledge.settings_store import setting_get
from memory.gate import services as gate

API_WRITE, DISTILLER, DREAMING, REVIEW = "api_write", "distiller", "dreaming", "review"
IMPORT = "import"  # an admin's import into an agent's memory (manage.py import_mem0)
AGENT_STATE = "agent_state"  # an agent's own machine state (a write with `state`: LangGraph store items)
ROUTES = (API_WRITE, DISTILLER, DREAMING, REVIEW, ENTRY_BLOCK, IMPORT, AGENT_STATE)


@dataclass(frozen=True)
class GateDecision:
    allow: bool
    reason: str = ""  # why a memory is held (e.g. the failing gate cases), never memory text
    verdict: str = ""  # pass | regressed | untested | error, once the gate exists


ALLOW = GateDecision(allow=True)


def gate_before_activation(
    memory: Memory, *, actor: Principal, route: str, outcome: dict | None
) -> GateDecision:
    """EVAL GATE HOOK: decide whether `memory` may go into force now.

    Called by activation_carry_out once the memory is stored, when activation decided "active",
    before anything else changes; `outcome` is the activation's conflict decision, kept with a
    queued check so the memory is activated as it was asked for once the check passes.
    Returns GateDecision(allow=False, reason=..., verdict=...) to keep the memory queued with
    queue_reason "gate" (see memory.gate for the modes)."""
    if (
        setting_get("BRAIN_MEMORY_ACTIVATION_GATE") == gate.SHADOW
        and gate.gate_tested(memory.owner)
        and profile_resolve(agent=memory.owner).missing
    ):
        # Shadow mode changes nothing, and while no model is set its check could only end "not
        # checked": no check, and no audit event on every edit. Enforce mode still holds.
        return ALLOW
    outcome = outcome or {}
    boundary = outcome.get("boundary")
    allow, reason, verdict = gate.gate_before_activation(
        memory=memory,
        actor=actor,
        route=route,
        reviewed=route == REVIEW,
        decision=outcome.get("decision"),
        boundary=datetime.datetime.fromisoformat(boundary) if boundary else None,
    )
    return GateDecision(allow=allow, reason=reason, verdict=verdict)


def gate_checks_stored_memory() -> bool:
    """Whether gate_before_activation needs the memory stored first (enforce mode records the
    check against it and holds it queued until the check has run)."""
    return setting_get("BRAIN_MEMORY_ACTIVATION_GATE") == gate.ENFORCE


def route_goes_active(*, actor: Principal, memory: Memory, route: str) -> bool:
    """Whether a memory arriving by `route` goes into force without a review:
    a trusted agent's API write, a write by a reviewer or admin, Dreaming stage B, a reviewer's
    approval, an import into a trusted agent's memory, the distiller when BRAIN_DISTILLER_AUTO_ACTIVATE is on, and an entry block by the
    base layer's rule (people and trusted agents)."""
    if route in (REVIEW, DREAMING):
        return True
    if route == ENTRY_BLOCK:
        return entry_block_goes_active(actor)
    if route == DISTILLER:
        return bool(setting_get("BRAIN_DISTILLER_AUTO_ACTIVATE"))
    if route == API_WRITE:
        if actor.is_agent:
            return bool(actor.agent.trusted)
        return actor.is_reviewer
    if route == IMPORT:  # what the agent would write itself: a trusted agent's goes active
        return bool(memory.owner.trusted)
    if route == AGENT_STATE:  # the owner's own working memory, read by no one else (writers: check_write)
        return (memory.tier, memory.store) == ("working", "self")
    raise ValueError(f"unknown activation route {route!r}")
