"""Reads of consolidation plans for the API and the console."""

from django.db.models import Prefetch

from knowledge.models import Memory
from memory.models import ConsolidationGroup, ConsolidationItem, ConsolidationPlan


def plan_list(*, state: str = "", owner=None, store: str = ""):
    qs = ConsolidationPlan.objects.select_related("owner")
    if state:
        qs = qs.filter(state=state)
    if owner is not None:
        qs = qs.filter(owner=owner)
    if store:
        qs = qs.filter(store=store)
    return qs


def _preview_status(item, kind: str) -> str:
    if item.role == ConsolidationItem.FOLD:
        return Memory.EXPIRED if kind == ConsolidationGroup.DIGEST else Memory.SUPERSEDED
    if item.role == ConsolidationItem.MERGED:
        return Memory.ACTIVE
    return item.before["memory"]["status"]


def plan_detail(plan: ConsolidationPlan) -> list[dict]:
    """Each group of a plan, before → after, with the texts and sources people need to judge
    it. For a plan not yet applied, `after` is what applying would do."""
    groups = plan.groups.select_related("owner").prefetch_related(
        Prefetch("items", queryset=ConsolidationItem.objects.order_by("id"))
    )
    out = []
    for group in groups:
        before, after = [], []
        for item in group.items.all():
            state = item.before["memory"]
            entry = {
                "id": item.memory_id,
                "role": item.role,
                "text": state["text"],
                "status": state["status"],
                "category": state["category"],
                "confidence": state["confidence"],
                "created_at": state["created_at"],
                "sources": [f"{s['kind']}:{s['ref']}" for s in item.before["sources"]],
            }
            if item.role != ConsolidationItem.MERGED:
                before.append(entry)
            if item.after is not None:  # applied (or applied and reverted): what apply did
                status = item.after.get("status", state["status"])
            else:  # what applying would do
                status = _preview_status(item, group.kind)
            sources = entry["sources"]
            if item.role == ConsolidationItem.KEEP and group.kind == ConsolidationGroup.PROMOTION:
                promoted = [f"{s['kind']}:{s['ref']}" for s in group.data.get("sources", [])]
                after.append({**entry, "sources": list(dict.fromkeys(entry["sources"] + promoted))})
                continue
            if item.role == ConsolidationItem.KEEP and group.kind in (
                ConsolidationGroup.DUPLICATE,
                ConsolidationGroup.VECTOR_DUPLICATE,
            ):
                extra = [
                    f"{s['kind']}:{s['ref']}"
                    for other in group.items.all()
                    if other.role == ConsolidationItem.FOLD
                    for s in other.before["sources"]
                ]
                sources = list(dict.fromkeys(sources + extra))
            if item.role != ConsolidationItem.FOLD:
                after.append({**entry, "status": status, "sources": sources})
            else:
                after.append({**entry, "status": status, "sources": sources, "into": group.target_id})
        out.append(
            {
                "id": group.pk,
                "kind": group.kind,
                "kind_label": group.get_kind_display(),
                "owner": group.owner.name,
                "store": group.store,
                "category": group.category,
                "key": group.key,
                "target": group.target_id,
                "merged_text": group.merged_text,
                "reason": group.reason,
                "data": group.data,
                "before": before,
                "after": after,
            }
        )
    return out
