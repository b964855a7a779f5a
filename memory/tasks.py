"""django-q2 entry points for the memory app."""

from memory import provenance


def provenance_check() -> dict:
    """Every BRAIN_PROVENANCE_CHECK_MINUTES: check every tracked source (idempotent)."""
    return provenance.provenance_check()
