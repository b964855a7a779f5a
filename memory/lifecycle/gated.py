"""A memory the enforcing eval gate holds (queued, reason gate) until its check has run in the
background. The check's model job (`gate.check`, memory.jobs) and the 15-minute sweep
(memory.tasks) run it here; when it passes, or could not be made and BRAIN_GATE_UNCHECKED says
`activate`, the memory goes through the one activation function again with the actor, route and
conflict decision that asked for it. A regression, or an unchecked memory under `hold`, stays in
the review queue saying why. Nothing is done to a memory that changed meanwhile (a reviewer
decided, a new version): its check is recorded, that is all."""

import datetime

from django.db import transaction

from knowledge.audit.services import snapshot
from knowledge.errors import Conflict
from knowledge.llm.jobs import actor_from
from knowledge.memories.rows import memory_row_state
from knowledge.models import Agent, Memory
from knowledge.principal import Principal
from memory.gate import services as gate
from memory.lifecycle.activation import memory_activate_stored
from memory.lifecycle.common import QUEUE_GATE, QUEUE_NEW, memory_audit, memory_lock
from memory.lifecycle.conflicts import MemoryConflict
from memory.models import GateCheck


def gate_check_settle_run(check_id: int) -> dict:
    """Run one queued check (if it is still pending) and settle its memory: the `gate.check`
    job and the sweep. Returns what happened, for the job's result."""
    check = gate.gate_check_claim(check_id)
    if check is None:
        verdict = GateCheck.objects.filter(pk=check_id).values_list("verdict", flat=True).first()
        return {
            "check": check_id,
            "verdict": verdict,
            "ran": False,
            "summary": f"Check {check_id} was not pending.",
        }
    check = gate.gate_check_perform(check, actor=Principal.system(gate.SYSTEM_ACTOR))
    result = {"check": check.pk, "memory": check.memory_id, "verdict": check.verdict, "ran": True}
    if check.verdict == GateCheck.PENDING:
        result["summary"] = f"Check {check.pk} is put off: {check.reason}. The sweep asks again."
        return result
    status = gate_settle(check) if check.trigger == gate.ENFORCE else ""
    result["summary"] = (
        f"Memory {check.memory_id}: {check.verdict}"
        + (f", {status}" if status else "")
        + (f" — {check.reason}" if check.reason else "")
    )
    if status:
        result["status"] = status
    return result


def _asker(args: dict) -> Principal:
    """The principal a held activation was asked by (an agent with its row: trust decides)."""
    principal = actor_from(args)
    if principal.is_agent:
        agent = Agent.objects.filter(name=principal.name).first()
        if agent is not None:
            return Principal.for_agent(agent)
    return principal


def gate_settle(check: GateCheck) -> str:
    """After an enforcing check finished: activate the memory it holds or say why it stays
    queued. One transaction with the memory's row lock and its audit event; no model call.
    Returns the memory's status afterwards ("" when it was no longer held for this check)."""
    asked = check.activation or {}
    with transaction.atomic():
        memory = memory_lock(check.memory_id)
        if (
            memory.status != Memory.QUEUED
            or memory.queue_reason != QUEUE_GATE
            or memory.version != check.memory_version
            or not asked
        ):
            return ""
        before = snapshot(memory)
        data = {"check": check.pk, "verdict": check.verdict, "route": asked.get("route")}
        goes = check.verdict in (GateCheck.PASS, GateCheck.UNTESTED) or (
            check.verdict == GateCheck.UNCHECKED and gate.unchecked_goes_ahead(reviewed=False)
        )
        status, reason = Memory.QUEUED, ""
        if goes:
            try:
                with transaction.atomic():
                    boundary = asked.get("boundary")
                    status = memory_activate_stored(
                        actor=_asker(asked["actor"]),
                        memory=memory,
                        route=asked["route"],
                        decision=asked.get("decision"),
                        boundary=datetime.datetime.fromisoformat(boundary) if boundary else None,
                    )
            except MemoryConflict as exc:
                memory = memory_lock(check.memory_id)
                reason = f"passed the eval gate, but contradicts active memories {exc.conflicts_with}"
            except Conflict as exc:  # e.g. a conflict that came up meanwhile needs a reviewer's decision
                memory = memory_lock(check.memory_id)
                reason = f"passed the eval gate, but: {exc.message}"
            if status == Memory.QUEUED and memory.queue_reason == QUEUE_GATE:
                # the route no longer lets it go active by itself (its agent lost trust): a reviewer decides
                reason = reason or f"passed the eval gate (check {check.pk}); a reviewer decides"
        elif check.verdict == GateCheck.REGRESSED:
            reason = f"gate: {check.reason}"
        else:
            reason = f"gate: {check.reason or 'not checked'}; a reviewer's approval puts it into force"
        if reason:
            queue_reason = QUEUE_NEW if goes else QUEUE_GATE  # passed: what holds it now is not the gate
            memory_row_state(memory, status=Memory.QUEUED, queue_reason=queue_reason, status_reason=reason)
        outcome = getattr(memory, "conflict_outcome", None)
        if outcome:
            data.update(outcome)
        memory_audit(
            "memory.activated" if status == Memory.ACTIVE else "memory.held",
            actor=Principal.system(gate.SYSTEM_ACTOR),
            memory=memory,
            before=before,
            reason=memory.status_reason
            if status != Memory.ACTIVE
            else f"passed the eval gate (check {check.pk})",
            data=data,
        )
    return status
