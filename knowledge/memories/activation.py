"""Decide, then store: the decision the one activation function makes, and the one entrance by
which new memory rows are stored with it.

THE activation function, `memory.lifecycle.activation.memory_activate`, reads and decides; it
stores nothing. It returns an `Activation`: the state the memory takes (active, or queued and
why), the memories it retires, and whether the enforcing eval gate must check the stored memory
first. `memory_rows_activate` stores new rows with what was decided for each, batched (three
statements for any number of rows): the API write, the bulk import, consolidation's merged
memories and entry blocks all enter here. What an activation then does to other memories
(retiring what it supersedes, the gate's check) is carried out by the lifecycle layer, through
the row functions of this package.

Every route chains decide, store and carry out in one place, `memory.lifecycle.activation.activate`.
Entry blocks are written by the base layer (`knowledge.entries`), below it: the memory app
registers that chain here at start-up (`activation_register`), and `memory_row_activate` /
`memory_row_activate_stored` call it for them. Every other route calls the lifecycle layer, which
calls down only."""

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field

from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from knowledge.memories.rows import memory_row_new, memory_row_state, memory_rows_insert
from knowledge.models import Memory
from knowledge.stores import private_store

ENTRY_BLOCK = "entry_block"  # the activation route of an entry's body block


@dataclass(frozen=True)
class Activation:
    """What activation decided for one memory, before anything is stored.

    `state` is every field the memory takes (status included); `retire` the memories the
    activation supersedes (REPLACE, or the one it names) and `close` those kept as of different
    times (closed at `boundary`); `outcome` is the conflict decision for the caller's audit
    event. With `gate`, the enforcing eval gate checks the stored memory before it goes into
    force: it is stored queued (`stored_state`) and the gate's verdict then decides."""

    state: dict
    retire: tuple[int, ...] = ()
    close: tuple[int, ...] = ()
    boundary: datetime.datetime | None = None
    outcome: dict | None = None
    gate: bool = False

    @property
    def status(self) -> str:
        return self.state.get("status", Memory.QUEUED)

    @property
    def stored_state(self) -> dict:
        """The fields a row is stored with: all of `state`, or none while the gate must check it."""
        return {} if self.gate else self.state

    @classmethod
    def held(cls, **state) -> "Activation":
        """A memory that waits in the review queue with these fields (queue_reason, status_reason)."""
        return cls(state={"status": Memory.QUEUED, **state})


@dataclass
class NewRow:
    """One new memory for `memory_rows_activate`: the unsaved row (`memory_row_new`), its
    sources ({"kind", "ref", optional "state" or "recorded"}), the decision made for it (None
    until the activation chain decides it), and the reason of its first version. The chain
    carries a stored row the same way, with its memory and decision only."""

    memory: Memory
    activation: Activation | None = None
    sources: list = field(default_factory=list)
    reason: str = ""


def memory_rows_activate(*, rows: list[NewRow]) -> None:
    """THE entrance of new memory rows: each row takes the state its activation decided and all
    are stored together — rows, first versions, sources — in three statements. Runs inside the
    caller's transaction; the caller carries out what the activations do to other memories and
    audits the new rows."""
    _people_hold({row.memory.store for row in rows})
    for row in rows:
        memory_row_state(row.memory, save=False, **row.activation.stored_state)
    memory_rows_insert([(row.memory, row.sources, row.reason) for row in rows])


def _people_hold(stores: set[str]) -> None:
    """New rows in a person's private store hold that person's row (FOR KEY SHARE) until they
    commit: forgetting the person (knowledge.erasure locks the row FOR UPDATE) waits for such a
    write to commit, and takes its rows, or the write waits for the erasure; no row lands
    between an erasure's plan and its commit."""
    prefix = private_store("")
    names = sorted(s.removeprefix(prefix) for s in stores if s.startswith(prefix))
    if names:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM knowledge_person WHERE name = ANY(%s) FOR KEY SHARE", [names])


# --- the base layer's route (entry blocks) -------------------------------------------------------

_activate: Callable[..., list[str]] | None = None


def entry_block_goes_active(actor) -> bool:
    """The route rule for entry blocks: people (console users, person tokens) and trusted agents
    write blocks that go into force; an untrusted agent's blocks wait in the review queue."""
    return not (actor.is_agent and not actor.agent.trusted)


def activation_register(*, activate: Callable[..., list[str]]) -> None:
    """Set the activation chain, `memory.lifecycle.activation.activate` (the memory app, once,
    when ready)."""
    global _activate
    _activate = activate


def _registered() -> Callable[..., list[str]]:
    if _activate is None:
        raise ImproperlyConfigured("No activation function is registered (is the memory app installed?).")
    return _activate


def memory_row_activate(
    *, actor, memory: Memory, route: str, sources=(), now=None, reason: str = ""
) -> Memory:
    """An entry block's new row through the activation chain: decided, stored through
    memory_rows_activate, then carried out; it comes back active or queued (`memory.status`).
    Runs inside the caller's transaction; the caller audits the new row."""
    _registered()(actor=actor, route=route, rows=[NewRow(memory, None, list(sources), reason)], now=now)
    return memory


def memory_row_activate_stored(*, actor, memory: Memory, route: str) -> Memory:
    """Pass a stored, queued, row-locked entry block through the activation chain (a queued
    block that a person or trusted agent corrects goes into force this way)."""
    _registered()(actor=actor, route=route, rows=[NewRow(memory)], stored=True)
    return memory


def memory_row_create(*, sources=(), reason: str = "", **fields) -> Memory:
    """A memory stored in exactly the state its `fields` give (memory_row_new's arguments),
    through the one entrance, with no decision made: demo data and test fixtures that need a
    memory in a given state. No route of the product calls it."""
    memory = memory_row_new(**fields)
    memory_rows_activate(rows=[NewRow(memory, Activation(state={}), list(sources), reason)])
    return memory
