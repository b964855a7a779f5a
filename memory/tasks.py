"""django-q2 entry points for the memory app."""

from memory.lifecycle.expiry import memory_expire_due
from memory.provenance import services as provenance


def provenance_check() -> dict:
    """Every BRAIN_PROVENANCE_CHECK_MINUTES: check every tracked source (idempotent)."""
    return provenance.provenance_check()


def expire_short_term_memory() -> int:
    """Hourly: expire working and episodic memories whose TTL has passed. Episodic memories of
    a conversation are first summarised into a session digest by the reconciler (their plan
    expires them); the rest expire plainly. Idempotent."""
    from memory.reconciler.services import reconciler_decay_due

    reconciler_decay_due()
    return memory_expire_due()


def gate_run_pending() -> int:
    """Every 15 minutes (shadow mode): run the queued eval-gate checks."""
    from knowledge.principal import Principal
    from memory.gate.services import gate_run_pending as run

    return run(actor=Principal.system("eval-gate"))
