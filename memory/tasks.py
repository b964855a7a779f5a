"""django-q2 entry points for the memory app."""

from memory.lifecycle.expiry import memory_expire_due
from memory.provenance import services as provenance


def provenance_check() -> dict:
    """Every BRAIN_PROVENANCE_CHECK_MINUTES: check every tracked source (idempotent)."""
    return provenance.provenance_check()


def expire_short_term_memory() -> int:
    """Hourly: expire working and episodic memories whose TTL has passed. Episodic memories of
    a conversation are first summarised into a session digest by the reconciler (their plan
    expires them); the rest expire plainly, except those of an agent whose digest pass waits for
    the model server (they wait for it). Idempotent."""
    from memory.reconciler.selectors import reconciler_waiting
    from memory.reconciler.services import reconciler_decay_due

    reconciler_decay_due()
    return memory_expire_due(episodes_kept_for=reconciler_waiting())


def gate_run_pending(limit: int = 50) -> int:
    """Every 15 minutes: run the eval-gate checks still pending (shadow checks, checks put off
    while the model server did not answer, checks whose job was lost) and settle the memories
    the enforcing gate holds for them. Returns how many were run to a verdict."""
    from memory.gate.services import gate_checks_due
    from memory.lifecycle.gated import gate_check_settle_run

    done = 0
    for check_id in gate_checks_due()[:limit]:
        result = gate_check_settle_run(check_id)
        done += result["ran"] and result["verdict"] != "pending"
    return done
