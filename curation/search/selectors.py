"""The console's one search: a word or phrase looked up in every kind a person works with —
memories, entries, materials, skills, audit events — each through the selector its own list
uses, so the access rules are the lists' own (store visibility from knowledge.access)."""

import dataclasses

from django.db.models import Q

from knowledge.audit.selectors import AuditFilters, audit_events
from knowledge.entries.selectors import EntryFilters, entry_search
from knowledge.materials.selectors import materials_for
from knowledge.models import Agent
from knowledge.principal import Principal
from memory.lifecycle.selectors import memory_list
from memory.skills.selectors import skill_list

PER_KIND = 5
MAX_QUERY = 200


@dataclasses.dataclass
class Group:
    kind: str  # memories | entries | materials | skills | audit
    label: str
    items: list
    more: bool  # more than PER_KIND matched; the group's list page has them all
    list_url: str = ""


def _first(qs, n: int = PER_KIND) -> tuple[list, bool]:
    rows = list(qs[: n + 1])
    return rows[:n], len(rows) > n


def site_search(principal: Principal, q: str, *, owner: Agent | None = None) -> list[Group]:
    """Up to PER_KIND hits of each kind that `principal` may see and `q` matches, grouped by kind;
    `owner` narrows to one agent's knowledge as the console's owner selector does everywhere.
    Kinds with no hit are left out."""
    q = (q or "").strip()[:MAX_QUERY]
    if not q:
        return []
    groups = []

    memories, more = _first(memory_list(principal, words=q, agent=owner.name if owner else ""))
    groups.append(Group("memories", "Memories", memories, more))

    page = entry_search(principal, EntryFilters(q=q, owner=owner), page_size=PER_KIND)
    groups.append(Group("entries", "Entries", page.entries, page.count > PER_KIND))

    materials = materials_for(principal).filter(Q(title__icontains=q) | Q(external_ref__icontains=q))
    if owner is not None:
        materials = materials.filter(owner=owner)
    rows, more = _first(materials.order_by("-created_at", "-id"))
    groups.append(Group("materials", "Materials", rows, more))

    skills = skill_list().filter(Q(name__icontains=q) | Q(title__icontains=q) | Q(instructions__icontains=q))
    rows, more = _first(skills)
    groups.append(Group("skills", "Skills", rows, more))

    # Audit events name ids and reasons, never text: match the reason, the action or the actor.
    events = audit_events(AuditFilters(owner=owner.name if owner else "")).filter(
        Q(reason__icontains=q) | Q(action__icontains=q) | Q(actor_name__iexact=q)
    )
    rows, more = _first(events)
    groups.append(Group("audit", "Audit events", rows, more))
    return [g for g in groups if g.items]
