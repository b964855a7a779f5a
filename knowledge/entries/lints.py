"""Knowledge lints, shown on the Knowledge page's Status tab: entries a curator should look at.

- dated names: a year, a quarter or a month in the name ("Pricing 2025", "Q3 roadmap") — the
  fact ages while the name says it is current; the date belongs in a block or a property;
- near-duplicate names: entries of one owner whose names differ only in case, punctuation,
  spacing or a plural "s" ("On-call rota", "on call rotas");
- oversized entries: a body counted (knowledge.tokens) above OVERSIZED_TOKENS, the default recall
  budget, so recall can never deliver the entry whole;
- entries with no body: no active or queued block;
- lessons with no source: a live lesson of a skill overlay that cites nothing, so nobody can
  tell which task outcome, message or conversation taught it (the skills API refuses such a
  lesson; older or imported rows can still lack one). Its items link to the memory.

Every lint reads only entries the principal may read (knowledge.access) and honours the console's
owner selector. Each reports its count and its first LINT_EXAMPLES entries."""

import dataclasses
import re

from django.contrib.postgres.aggregates import ArrayAgg
from django.db import connection
from django.db.models import Count, Exists, F, Func, OuterRef, TextField
from django.db.models.functions import Length

from knowledge import access
from knowledge.entries.services import BODY_STATUSES
from knowledge.models import Agent, Entry, Memory
from knowledge.principal import Principal
from knowledge.tokens import count_tokens

OVERSIZED_TOKENS = 2000
LINT_EXAMPLES = 20
# PostgreSQL regular expression (case-insensitive): a year 1900–2099, a quarter ("Q3"), or a
# month followed by a day or year ("May 5", "Sept. 2024"); a word that merely starts like a
# month ("Marketing 2") is not a date.
MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
DATED_NAME = rf"\m(19|20)[0-9]{{2}}\M|\mq[1-4]\M|\m({MONTHS})\M\.?\s*[0-9]"


@dataclasses.dataclass
class Lint:
    code: str
    title: str
    advice: str
    count: int
    entries: list  # Entry rows, each with `lint_detail` set
    groups: list = dataclasses.field(default_factory=list)  # near-duplicates: lists of entries
    items: list = dataclasses.field(default_factory=list)  # memories: {"memory", "label", "detail"}

    @property
    def shown(self) -> int:
        """How many of `count` are listed (entries, or groups of near-duplicates)."""
        return len(self.groups) if self.groups else len(self.entries) or len(self.items)


def _entries(principal: Principal, owner: Agent | None):
    qs = Entry.objects.filter(access.readable_q(principal)).select_related("owner")
    return qs.filter(owner=owner) if owner else qs


def _name_key(name: str) -> str:
    """A name as the near-duplicate lint compares it; brain_name_key (migration
    0020_status_indexes_dreaming) is the same in SQL, and a test holds the two equal."""
    words = re.findall(r"[a-z0-9]+", name.lower())
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words)


def dated_names(principal: Principal, owner: Agent | None = None) -> Lint:
    qs = _entries(principal, owner).filter(name__iregex=DATED_NAME).order_by("name", "pk")
    entries = list(qs[:LINT_EXAMPLES])
    for entry in entries:
        entry.lint_detail = ""
    return Lint(
        "dated-names",
        "Dated names",
        "The name carries a date: the entry will read as current after it is not. Put the date in "
        "a block or a property and name the subject.",
        qs.count(),
        entries,
    )


def near_duplicate_names(principal: Principal, owner: Agent | None = None) -> Lint:
    """Groups of entries of one owner whose names normalise alike (see _name_key). The database
    groups them by brain_name_key, _name_key's twin, from the index that holds it for every live
    entry (migration 0020_status_indexes_dreaming), so no name is read into Python."""
    rows = (
        _entries(principal, owner)
        .annotate(name_key=Func(F("name"), function="brain_name_key", output_field=TextField()))
        .values("owner_id", "name_key")
        .annotate(n=Count("pk"), ids=ArrayAgg("pk"))  # no ORDER BY: one sort per group cost more
        .filter(n__gt=1)
        .values_list("ids", flat=True)
    )
    groups = list(rows)
    entries = Entry.objects.select_related("owner").in_bulk([pk for ids in groups for pk in ids])
    # A group in name order, groups by their first name's entry (as when names were read in order).
    duplicate = sorted(
        (sorted(ids, key=lambda pk: (entries[pk].name, pk)) for ids in groups), key=lambda ids: ids[0]
    )
    shown = duplicate[:LINT_EXAMPLES]
    entry_groups = [[entries[pk] for pk in ids] for ids in shown]
    for group in entry_groups:
        for entry in group:
            entry.lint_detail = f"{len(group)} alike"
    return Lint(
        "near-duplicate-names",
        "Near-duplicate names",
        "Names that differ only in case, punctuation or a plural: probably one subject. Merge "
        "them, or rename one so recall can tell them apart.",
        len(duplicate),
        [entry for group in entry_groups for entry in group],
        groups=entry_groups,
    )


# A body of n blocks over OVERSIZED_TOKENS characters has a block over OVERSIZED_TOKENS / n
# characters: an entry of at most FEW_BLOCKS blocks is a candidate only with a block over
# LONG_BLOCK characters. Partial indexes hold exactly those blocks and the entries with more
# blocks (migration 0020_status_indexes_dreaming), so the lint sums the bodies of candidates only.
FEW_BLOCKS = 5
LONG_BLOCK = OVERSIZED_TOKENS // FEW_BLOCKS


def oversized_entries(principal: Principal, owner: Agent | None = None) -> Lint:
    """Entries whose body counts above OVERSIZED_TOKENS. A token is at least one character, so
    only bodies longer than that many characters are counted (largest first)."""
    visible = _entries(principal, owner)
    long_block = Memory.objects.annotate(text_chars=Length("text")).filter(
        entry_id=OuterRef("pk"), entry__isnull=False, status__in=BODY_STATUSES, text_chars__gt=LONG_BLOCK
    )
    few = visible.filter(block_count__lte=FEW_BLOCKS).filter(Exists(long_block)).values_list("pk", flat=True)
    many = visible.filter(block_count__gt=FEW_BLOCKS).values_list("pk", flat=True)
    body = list(few.union(many))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.entry_id, sum(length(m.text)) AS chars FROM {Memory._meta.db_table} m "
            f"WHERE m.entry_id = ANY(%s) AND m.status = ANY(%s) "
            f"GROUP BY m.entry_id HAVING sum(length(m.text)) > %s ORDER BY chars DESC LIMIT 500",
            [body, list(BODY_STATUSES), OVERSIZED_TOKENS],
        )
        candidates = [row[0] for row in cursor.fetchall()]
    tokens: dict[int, int] = dict.fromkeys(candidates, 0)
    for entry_id, text in Memory.objects.filter(
        entry_id__in=candidates, status__in=BODY_STATUSES
    ).values_list("entry_id", "text"):
        tokens[entry_id] += count_tokens(text)
    over = sorted((pk for pk, n in tokens.items() if n > OVERSIZED_TOKENS), key=lambda pk: -tokens[pk])
    rows = Entry.objects.select_related("owner").in_bulk(over[:LINT_EXAMPLES])
    entries = [rows[pk] for pk in over[:LINT_EXAMPLES]]
    for entry in entries:
        entry.lint_detail = f"{tokens[entry.pk]:,} tokens"
    return Lint(
        "oversized-entries",
        "Oversized entries",
        f"The body counts more than {OVERSIZED_TOKENS:,} tokens, the default recall budget: an agent "
        "never gets it whole. Split it into entries with one subject each.",
        len(over),
        entries,
    )


def entries_without_body(principal: Principal, owner: Agent | None = None) -> Lint:
    qs = _entries(principal, owner).filter(block_count=0).order_by("-updated_at", "pk")
    entries = list(qs[:LINT_EXAMPLES])
    for entry in entries:
        entry.lint_detail = ""
    return Lint(
        "no-body",
        "Entries with no body",
        "No active or queued block: recall finds the name and nothing to say. Add blocks or delete it.",
        qs.count(),
        entries,
    )


def lessons_without_source(principal: Principal, owner: Agent | None = None) -> Lint:
    qs = Memory.objects.filter(
        access.readable_q(principal), skill__isnull=False, status__in=BODY_STATUSES, sources__isnull=True
    )
    if owner is not None:
        qs = qs.filter(owner=owner)
    rows = list(
        qs.order_by("-updated_at", "pk").values_list("pk", "owner__name", "skill__name", "text")[
            :LINT_EXAMPLES
        ]
    )
    items = [
        {
            "label": f"lesson {pk} of {agent} · {skill}",
            "memory": pk,
            "detail": text[:120],
        }
        for pk, agent, skill, text in rows
    ]
    return Lint(
        "lessons-without-source",
        "Lessons with no source",
        "Skill experience that cites no task outcome, message or conversation: nobody can check what "
        "taught it. Add its evidence or remove it in the agent library.",
        qs.count(),
        [],
        items=items,
    )


def knowledge_lints(principal: Principal, owner: Agent | None = None) -> list[Lint]:
    return [
        dated_names(principal, owner),
        near_duplicate_names(principal, owner),
        oversized_entries(principal, owner),
        entries_without_body(principal, owner),
        lessons_without_source(principal, owner),
    ]
