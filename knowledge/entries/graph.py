"""The Entries tab's map: entries as nodes and their relations as edges (each with the evidence
it rests on), and on demand what cites one entry — the data the graph view draws."""

from django.db.models import Q

from knowledge import access
from knowledge.models import Entry, EntryRelation, Material, Memory
from knowledge.principal import Principal

# A graph larger than this is cut (and says so): filter by type or store to see the rest.
MAX_NODES = 5000


def graph_data(principal: Principal, *, type: str = "", store: str = "", owner=None) -> dict:
    """Live entries `principal` may read (filtered by type, store and owner) and the relations
    between them, ordered by name: {"nodes", "edges", "cut"}."""
    entries = Entry.objects.filter(access.readable_q(principal))
    if type:
        entries = entries.filter(type=type)
    if store:
        entries = entries.filter(store=store)
    if owner is not None:
        entries = entries.filter(owner=owner)
    nodes = list(entries.order_by("name", "id").values("id", "name", "type", "store")[: MAX_NODES + 1])
    cut = len(nodes) > MAX_NODES
    nodes = nodes[:MAX_NODES]
    ids = {n["id"] for n in nodes}
    edges = [
        {
            "id": r["id"],
            "source": r["source_id"],
            "target": r["target_id"],
            "predicate": r["predicate"],
            "evidence": [f"{s.get('kind', '')} {s.get('ref', '')}".strip() for s in r["sources"]],
        }
        for r in EntryRelation.objects.filter(source_id__in=ids, target_id__in=ids)
        .order_by("id")
        .values("id", "source_id", "target_id", "predicate", "sources")
    ]
    return {"nodes": nodes, "edges": edges, "cut": cut}


def entry_citing(principal: Principal, entry: Entry) -> dict:
    """What cites `entry`: memories `principal` may read whose sources name it, and the
    materials its body blocks were learned from."""
    citing = list(
        Memory.objects.filter(
            access.memory_readable_q(principal),
            sources__kind="entry",
            sources__ref=str(entry.pk),
            status__in=(Memory.ACTIVE, Memory.QUEUED),
        )
        .select_related("owner")
        .order_by("-created_at", "-id")[:50]
    )
    refs = {
        ref.split("#", 1)[0]
        for ref in Memory.objects.filter(entry=entry, sources__kind="material").values_list(
            "sources__ref", flat=True
        )
        if ref
    }
    by_ref = Q(pk__in=[int(r) for r in refs if r.isdigit()])
    for ref in refs:
        if ":" in ref:
            connector, external = ref.split(":", 1)
            by_ref |= Q(connector=connector, external_ref=external)
    materials = list(Material.objects.filter(access.readable_q(principal)).filter(by_ref).order_by("title"))
    return {"memories": citing, "materials": materials}
