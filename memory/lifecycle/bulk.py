"""Many memories of one owner by one writer at once (an import): the write path of
memory_write, batched, not a second copy of it. Every memory passes the same checks
(`memory_write_check`), the same exact-duplicate rule (`exact_duplicates_for_writes`: the rule's
SQL, one probe per memory in one statement), the one activation function (`memory_activate`, per
memory: review for untrusted agents, the gate, trusted writes going active) and gets the same
`memory.written` event (`memory_written_audit`); what changes is how many statements carry them.

How a batch is cut: memories whose activation reads nothing but the memory itself (no key, no
`supersedes`, no enforcing gate: `activation_reads_memories`) are held back, then passed
together through the one activation chain (`activate`: each decided, all stored by
`memory_rows_activate` in three statements, each carried out) with their events (`audit_held`:
two). Before a memory whose activation reads other memories, or one that repeats
a memory of its own batch, the held ones are stored, and that memory is written exactly as
memory_write writes it — so every decision sees what earlier memories of the batch wrote, as it
would have had each been written alone. Near duplicates are not a write rule (the review queue
shows them as hints, from the vectors the embedding backlog gives every new memory), here as in
memory_write."""

from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from knowledge.audit.services import audit_held
from knowledge.errors import DomainError
from knowledge.memories.activation import NewRow
from knowledge.models import Agent, Memory
from knowledge.principal import Principal
from memory.lifecycle.activation import activate, activation_reads_memories
from memory.lifecycle.activation_hooks import API_WRITE
from memory.lifecycle.duplicates import exact_duplicate_for_write, exact_duplicates_for_writes
from memory.lifecycle.write import (
    WriteRequest,
    duplicate_answers,
    duplicate_corroborate,
    memory_row_for_write,
    memory_write,
    memory_write_check,
    memory_written_audit,
)

CHUNK = 200  # memories per transaction


class ItemRefused(Exception):
    """Memory number `index` (from 0) of a memory_write_many call was refused (`error`, a domain
    error); nothing of that call's memories was written unless the refusal came from a rule that
    reads what earlier memories wrote (see memory_write_many)."""

    def __init__(self, index: int, error: DomainError):
        super().__init__(f"memory {index}: {error}")
        self.index, self.error = index, error


@dataclass
class _Write:
    index: int
    request: WriteRequest  # checked: its text is the one stored
    answers_duplicate: bool

    @property
    def store(self) -> str:
        return self.request.store

    @property
    def sources(self) -> list:
        return list(self.request.sources)


def memory_write_many(
    *,
    actor: Principal,
    owner: Agent,
    store: str,
    items: list[dict],
    route: str = API_WRITE,
    chunk: int = CHUNK,
    progress: Callable[[int, int], None] | None = None,
) -> list[Memory]:
    """memory_write for each of `items` (dicts of WriteRequest's fields but the owner: text,
    sources, tier, key, value, …), all owned by `owner`, in `store` unless an item names its own `store`
    (an import of many people's memories: one batch across their private stores), in order.
    Returns, for each, the memory
    written (queued or active) or, for an agent's exact duplicate, the live memory it repeats
    (with `duplicate_of`), as memory_write would.

    Every item is checked before the first is written: a refused one raises ItemRefused naming it
    and nothing is written. Then the items are written `chunk` at a time, one transaction each
    (progress(done, total) after each). A rule that reads what earlier items wrote — strict
    anti-drift on a keyed memory — can still refuse an item later: its chunk is rolled back and
    ItemRefused raised; earlier chunks stay (a writer that can re-run skips what it wrote)."""
    writes = []
    for index, item in enumerate(items):
        try:
            request = memory_write_check(
                actor=actor, request=WriteRequest(owner=owner, **{"store": store, **item})
            )
        except DomainError as exc:
            raise ItemRefused(index, exc) from None
        answers = duplicate_answers(
            actor=actor, supersedes=request.supersedes, attach=request.attach, route=route
        )
        writes.append(_Write(index, request, answers))

    written: list[Memory] = []
    unplanned = _never_analyzed()
    for start in range(0, len(writes), chunk):
        with transaction.atomic():
            written += _Chunk(actor, owner, route).write(writes[start : start + chunk])
        if unplanned:
            _analyze()
            unplanned = False
        if progress:
            progress(len(written), len(writes))
    return written


def _never_analyzed() -> bool:
    """Whether the memory table has never been analyzed (a fresh install). Its planner then has
    no statistics for the exact-duplicate index and probes another one, folding the text of every
    live memory once per write: 11 ms a write at 200 memories, growing with each chunk, until
    autovacuum gets to the table (a minute later, after the import)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples < 0 FROM pg_class WHERE oid = %s::regclass", [Memory._meta.db_table])
        row = cursor.fetchone()
    return bool(row and row[0])


def _analyze() -> None:
    """What PostgreSQL's guide to populating a database advises after loading many rows."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(Memory._meta.db_table)}")


class _Chunk:
    """One transaction's worth of writes."""

    def __init__(self, actor: Principal, owner: Agent, route: str):
        self.actor, self.owner, self.route = actor, owner, route
        self.now = timezone.now()
        self.held: list[tuple[NewRow, dict | None]] = []  # to decide and store together
        self.out: dict[int, Memory] = {}

    def write(self, writes: list[_Write]) -> list[Memory]:
        rows = [self._row(w) for w in writes]
        start = 0
        while start < len(writes):
            # The memories up to the first one whose activation reads other memories.
            cut = next(
                (n for n in range(start, len(writes)) if activation_reads_memories(rows[n])), len(writes)
            )
            self._write_set(writes[start:cut], rows[start:cut])
            if cut < len(writes):
                self._store_held()
                self._write_alone(writes[cut])
            start = cut + 1
        self._store_held()
        return [self.out[w.index] for w in writes]

    def _row(self, w: _Write) -> Memory:
        return memory_row_for_write(actor=self.actor, request=w.request, now=self.now)

    def _write_set(self, writes: list[_Write], rows: list[Memory]) -> None:
        if not writes:
            return
        found = exact_duplicates_for_writes(
            owner=self.owner,
            writes=[(w.store, r.tier, r.text, r.key, r.value) for w, r in zip(writes, rows, strict=True)],
        )
        existing = self._rows([hit for (hit, _), w in zip(found, writes, strict=True) if w.answers_duplicate])
        said: set[tuple[str, str]] = set()  # (store, folded text) of the memories of this set held so far
        for w, row, (other, folded) in zip(writes, rows, found, strict=True):
            if w.answers_duplicate:
                if (w.store, folded) in said:
                    # It may repeat a memory of this very set: store those, and ask the rule.
                    self._store_held()
                    repeated = exact_duplicate_for_write(
                        owner=self.owner,
                        store=w.store,
                        tier=row.tier,
                        text=row.text,
                        key=row.key,
                        value=row.value,
                    )
                    other = None if repeated is None else repeated.pk
                    if repeated is not None:
                        existing[other] = repeated
                if other is not None:
                    self.out[w.index] = duplicate_corroborate(
                        actor=self.actor, memory=existing[other], sources=w.sources
                    )
                    continue
            said.add((w.store, folded))
            self._hold(w, row)

    def _hold(self, w: _Write, row: Memory) -> None:
        self.held.append((NewRow(row, None, w.sources), w.request.audit_data))
        self.out[w.index] = row

    def _store_held(self) -> None:
        if not self.held:
            return
        data = {id(new): audit_data for new, audit_data in self.held}

        def audit(new: NewRow, status: str) -> None:
            memory_written_audit(
                actor=self.actor,
                memory=new.memory,
                status=status,
                route=self.route,
                sources=len(new.sources),
                data=data[id(new)],
            )

        with audit_held():
            activate(
                actor=self.actor,
                route=self.route,
                rows=[new for new, _ in self.held],
                now=self.now,
                then=audit,
            )
        self.held = []

    def _write_alone(self, w: _Write) -> None:
        try:
            self.out[w.index] = memory_write(
                actor=self.actor, request=w.request, route=self.route, now=self.now
            )
        except DomainError as exc:
            raise ItemRefused(w.index, exc) from None

    @staticmethod
    def _rows(ids: list[int]) -> dict[int, Memory]:
        if not ids:
            return {}
        return {
            m.pk: m
            for m in Memory.objects.select_related("owner").prefetch_related("sources").filter(pk__in=ids)
        }
