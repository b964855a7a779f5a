"""Which cited references name rows inside a filter: a source's `ref` is a row id, or for a
material its id or `<connector>:<ref>`, either with an optional `#<section>`. Lookups only; the
filter, and so what a principal may cite, is `knowledge.access` (`readable_sources`)."""

from collections.abc import Callable

from django.db.models import Q

from knowledge.models import Material


def _ids(refs) -> dict[int, str]:
    return {int(r): r for r in refs if r.isdigit() and len(r) < 19}


def refs_among(model, refs, visible: Callable[[], Q]) -> set[str]:
    """The refs among `refs` that name rows of `model` inside `visible()` (called only when some
    ref could name a row: the filter may cost queries to build)."""
    if model is Material:
        return _materials_among(refs, visible)
    ids = _ids(refs)
    if not ids:
        return set()
    found = model.objects.filter(visible()).filter(pk__in=list(ids)).values_list("pk", flat=True)
    return {ids[pk] for pk in found}


def _materials_among(refs, visible: Callable[[], Q]) -> set[str]:
    bases = {r: r.partition("#")[0] for r in refs}
    ids = _ids(set(bases.values()))
    pairs = [b.partition(":")[::2] for b in set(bases.values()) if ":" in b]
    if not ids and not pairs:
        return set()
    wanted = Q(pk__in=list(ids))
    for connector, external_ref in pairs:
        wanted |= Q(connector=connector, external_ref=external_ref)
    seen = set()
    for pk, connector, external_ref in (
        Material.objects.filter(visible()).filter(wanted).values_list("pk", "connector", "external_ref")
    ):
        seen.add(str(pk))
        if connector:
            seen.add(f"{connector}:{external_ref}")
    return {r for r, base in bases.items() if base in seen}
