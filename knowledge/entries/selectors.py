"""Reads of entries, their bodies, relations, history and curation guides, and the entries list
(ranked search itself is in knowledge.entries.search)."""

import dataclasses
import datetime
import math

from django.db.models import Exists, OuterRef, Q
from django.utils.dateparse import parse_date, parse_datetime

from knowledge import access, names
from knowledge.entries.search import ranked_ids
from knowledge.entries.services import BODY_STATUSES
from knowledge.errors import Invalid
from knowledge.models import Agent, AuditEvent, CurationGuide, Entry, EntryRelation, Memory, Revision
from knowledge.principal import REVIEWER, Principal

MAX_PAGE_SIZE = 100


def entry_body(entry: Entry) -> list[Memory]:
    """The entry's body: active and queued blocks in order, with their sources."""
    return list(
        Memory.objects.filter(entry=entry, status__in=BODY_STATUSES)
        .order_by("position", "id")
        .prefetch_related("sources")
    )


def entry_relations(principal: Principal, entry: Entry) -> tuple[list, list]:
    """(outgoing, incoming) relations whose other end is live and readable by `principal`."""
    readable = Entry.objects.filter(access.readable_q(principal)).values("pk")
    outgoing = (
        EntryRelation.objects.filter(source=entry, target__in=readable)
        .select_related("target")
        .order_by("predicate", "id")
    )
    incoming = (
        EntryRelation.objects.filter(target=entry, source__in=readable)
        .select_related("source")
        .order_by("predicate", "id")
    )
    return list(outgoing), list(incoming)


def entry_history(entry: Entry, *, limit: int = 500):
    """Audit events about this entry (entry services record `data.entry`), and any other event
    whose revisions touched the entry, its blocks or its relations — newest first."""
    block_ids = [str(i) for i in Memory.objects.filter(entry=entry).values_list("pk", flat=True)]
    relation_ids = [
        str(i)
        for i in EntryRelation.objects.filter(Q(source=entry) | Q(target=entry)).values_list("pk", flat=True)
    ]
    touched = Q(object_type="entry", object_id=str(entry.pk))
    if block_ids:
        touched |= Q(object_type="memory", object_id__in=block_ids)
    if relation_ids:
        touched |= Q(object_type="relation", object_id__in=relation_ids)
    ids = set(
        AuditEvent.objects.filter(data__entry=entry.pk).order_by("-id").values_list("pk", flat=True)[:limit]
    )
    ids |= set(Revision.objects.filter(touched).order_by("-id").values_list("event_id", flat=True)[:limit])
    return (
        AuditEvent.objects.filter(pk__in=ids)
        .annotate(restorable=Exists(Revision.objects.filter(event=OuterRef("pk"))))
        .order_by("-created_at", "-id")
    )


def entry_types(owner: Agent | None = None) -> list[str]:
    """Types to offer in forms: the guide's domain types (or the defaults) and the types in use."""
    types = list(CurationGuide.DEFAULT_DOMAIN_TYPES)
    guides = CurationGuide.objects.filter(owner=owner) if owner else CurationGuide.objects.all()
    for guide_types in guides.values_list("domain_types", flat=True):
        types.extend(t for t in guide_types if t not in types)
    return types


# --- search ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class EntryFilters:
    q: str = ""
    type: str = ""
    store: str = ""
    author: str = ""
    owner: Agent | None = None
    updated_after: datetime.datetime | None = None
    updated_before: datetime.datetime | None = None
    deleted: bool = False
    sort: str = "updated"  # updated | name (a search is always ranked)


@dataclasses.dataclass
class EntryPage:
    entries: list
    count: int
    page: int
    page_size: int

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.count / self.page_size))

    @property
    def has_next(self) -> bool:
        return self.page < self.pages

    @property
    def has_previous(self) -> bool:
        return self.page > 1


def _filtered(principal: Principal, f: EntryFilters):
    manager = Entry.all_objects.filter(deleted_at__isnull=False) if f.deleted else Entry.objects.all()
    qs = manager.filter(access.readable_q(principal))
    if f.owner is not None:
        qs = qs.filter(owner=f.owner)
    if f.type:
        qs = qs.filter(type=f.type.lower())
    if f.store:
        qs = qs.filter(store=f.store)
    if f.author:
        qs = qs.filter(Q(block_authors__contains=[f.author]) | Q(author_name=f.author))
    if f.updated_after:
        qs = qs.filter(updated_at__gte=f.updated_after)
    if f.updated_before:
        qs = qs.filter(updated_at__lt=f.updated_before)
    return qs


def entry_search(principal: Principal, f: EntryFilters, *, page: int = 1, page_size: int = 25) -> EntryPage:
    """One page of the entries `principal` may read that pass the filters: ranked by relevance
    when `f.q` is given, else newest change first (or by name)."""
    page_size = max(1, min(int(page_size), MAX_PAGE_SIZE))
    page = max(1, int(page))
    offset = (page - 1) * page_size
    qs = _filtered(principal, f)
    q = (f.q or "").strip()
    if not q:
        order = ["name", "id"] if f.sort == "name" else ["-updated_at", "-id"]
        count = qs.count()
        rows = list(qs.select_related("owner").order_by(*order)[offset : offset + page_size])
        return EntryPage(rows, count, page, page_size)

    ids, count = ranked_ids(qs, q, limit=page_size, offset=offset)
    if not ids and page > 1:
        count = ranked_ids(qs, q, limit=1, offset=0)[1]
    by_id = Entry.all_objects.select_related("owner").in_bulk(ids)
    return EntryPage([by_id[i] for i in ids if i in by_id], count, page, page_size)


# --- filters from query parameters (API) or GET form fields (console) ---


def parse_when(value: str, field: str, *, end: bool = False):
    """A date or date-time filter value (a date means its start, or with `end` the next day's
    start); UTC when no zone is given."""
    if not value:
        return None
    moment = parse_datetime(value)
    if moment is None:
        day = parse_date(value)
        if day is None:
            raise Invalid({field: ["A date (YYYY-MM-DD) or an ISO 8601 date-time."]})
        moment = datetime.datetime.combine(day + datetime.timedelta(days=1 if end else 0), datetime.time())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment


def entry_filters_from(params, principal) -> EntryFilters:
    """EntryFilters from query parameters (API) or GET form fields (console); 400 on bad input."""
    owner = None
    if params.get("owner"):
        owner = names.owner_selected(params["owner"])
        if owner is None:
            raise Invalid({"owner": [f"No agent named {params['owner']}."]})
    store = params.get("store", "").strip()
    if store:
        store = access.parse_scope(store) if store in access.SCOPE_ALIASES else store
    deleted = params.get("deleted", "") in ("1", "true", "yes", "on")
    if deleted:
        access.require_role(principal, REVIEWER, "Only reviewers and admins list deleted entries.")
    sort = params.get("sort", "updated")
    if sort not in ("updated", "name"):
        raise Invalid({"sort": ["updated or name."]})
    return EntryFilters(
        q=params.get("q", "")[:300],
        type=params.get("type", "").strip()[:64],
        store=store[:120],
        author=params.get("author", "").strip()[:150],
        owner=owner,
        updated_after=parse_when(params.get("updated_after", ""), "updated_after"),
        updated_before=parse_when(params.get("updated_before", ""), "updated_before", end=True),
        deleted=deleted,
        sort=sort,
    )
