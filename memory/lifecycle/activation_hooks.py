"""The pluggable decisions inside the one activation function (`memory.lifecycle.activation.memory_activate`).

Each hook is a small function so a later capability can replace its body without touching the
activation function itself:

- `gate_before_activation` — the eval gate (memory.gate). In `enforce` mode it holds the memory
  in the queue (reason gate) and queues its check, which memory.lifecycle.gated carries out in
  the background; in `shadow` mode it queues a background check (none while no model is set:
  it could only end "not checked"). It never calls the model.
- `route_goes_active` — who goes into force at once (trusted agents', people's and Dreaming's
  writes, any agent's scratch, reviewer approvals), including the distiller's auto-activation
  setting.
"""

import datetime
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from knowledge.llm import profile_resolve
from knowledge.memories.activation import ENTRY_BLOCK, entry_block_goes_active
from knowledge.models import Memory
from knowledge.principal import Principal
from knowledge.settings_store import setting_get
from knowledge.stores import SELF
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


def working_ttl() -> datetime.timedelta:
    """How long working memory lives (BRAIN_SHORT_TERM_TTL_HOURS)."""
    return datetime.timedelta(hours=settings.BRAIN_SHORT_TERM_TTL_HOURS)


def is_own_scratch(older: Memory, owner_id: int) -> bool:
    """Whether `older` is working memory in the own store of the agent `owner_id`."""
    return older.owner_id == owner_id and (older.tier, older.store) == (Memory.WORKING, SELF)


def is_scratch(memory: Memory, *, now: datetime.datetime | None = None) -> bool:
    """Whether `memory` is its owner's scratch: working memory in its own store (read by no other
    agent), expiring within the working TTL, superseding nothing but its owner's own scratch.
    Scratch goes into force without review; promoted to a longer tier it is a new write, which
    review decides."""
    if not is_own_scratch(memory, memory.owner_id):
        return False
    if memory.expires_at is None or memory.expires_at > (now or timezone.now()) + working_ttl():
        return False
    return not memory.supersedes_id or is_own_scratch(memory.supersedes, memory.owner_id)


def route_goes_active(
    *, actor: Principal, memory: Memory, route: str, now: datetime.datetime | None = None
) -> bool:
    """Whether a memory arriving by `route` goes into force without a review:
    a trusted agent's API write, any agent's scratch (`is_scratch`), a write by a reviewer or
    admin, Dreaming stage B, a reviewer's approval, an import into a trusted agent's memory, the
    distiller when BRAIN_DISTILLER_AUTO_ACTIVATE is on, and an entry block by the base layer's
    rule (people and trusted agents)."""
    if route in (REVIEW, DREAMING):
        return True
    if route == ENTRY_BLOCK:
        return entry_block_goes_active(actor)
    if route == DISTILLER:
        return bool(setting_get("BRAIN_DISTILLER_AUTO_ACTIVATE"))
    if route == API_WRITE:
        if actor.is_agent:
            return bool(actor.agent.trusted) or is_scratch(memory, now=now)
        return actor.is_reviewer
    if route == IMPORT:  # what the agent would write itself: a trusted agent's goes active
        return bool(memory.owner.trusted)
    if route == AGENT_STATE:  # state is scratch (state_write_check refuses anything else)
        return is_scratch(memory, now=now)
    raise ValueError(f"unknown activation route {route!r}")
