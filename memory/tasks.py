"""django-q2 entry points for the memory lifecycle."""

from memory.services import memory_expire_due


def expire_short_term_memory() -> int:
    """Hourly: expire working and episodic memories whose TTL has passed. Idempotent."""
    return memory_expire_due()
