"""Reads for provenance: one memory's sources with their state, and the stale list."""

from knowledge import access
from knowledge.memories.fingerprints import EXTERNAL_KINDS, fingerprint_fields, internal_states
from knowledge.models import Memory, SourceState
from knowledge.principal import Principal


def _current_fields(source) -> dict | None:
    if source.kind in EXTERNAL_KINDS:
        state = SourceState.objects.filter(kind=source.kind, ref=source.ref).first()
        if state is None or state.deleted:
            return None
        return fingerprint_fields(source.kind, state.fields)
    current = internal_states(source.kind, [source.ref]).get(source.ref)
    return current[1] if current else None


def memory_provenance(memory: Memory, viewer: Principal) -> dict:
    """Each source with kind, ref, recorded fingerprint, state at the last check, when it was
    checked, and — for a changed source — the fields that changed, before and after. The
    fingerprint and the changes of a source `viewer` may not read (`access.readable_sources`:
    another agent's message, entry, material…) are left out and `readable` is false: they would
    show that source's text, or let it be guessed."""
    rows = list(memory.sources.all())
    readable = access.readable_sources(viewer, [(s.kind, s.ref) for s in rows])
    sources = []
    for source in rows:
        shown = (source.kind, source.ref) in readable
        item = {
            "kind": source.kind,
            "ref": source.ref,
            "fingerprint": source.fingerprint if shown else "",
            "state": source.state,
            "checked_at": source.checked_at,
            "readable": shown,
            "changes": [],
        }
        if shown and source.state == "changed" and source.snapshot is not None:
            current = _current_fields(source) or {}
            item["changes"] = [
                {"field": name, "before": source.snapshot.get(name), "after": current.get(name)}
                for name in sorted(set(source.snapshot) | set(current))
                if source.snapshot.get(name) != current.get(name)
            ]
        sources.append(item)
    return {
        "memory": memory.pk,
        "status": memory.status,
        "stale": memory.stale,
        "stale_reason": memory.stale_reason,
        "sources": sources,
    }


def stale_memories(principal, *, agent=None, store=None):
    qs = (
        Memory.objects.filter(access.memory_readable_q(principal), stale=True)
        .exclude(status__in=[Memory.SUPERSEDED, Memory.REJECTED, Memory.EXPIRED])
        .select_related("owner")
        .order_by("-updated_at", "-id")
    )
    if agent:
        qs = qs.filter(owner__name=agent)
    if store:
        qs = qs.filter(store=store)
    return qs
