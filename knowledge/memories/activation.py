"""The seam between every writer of new memory rows and THE activation function.

Every new memory row goes into force (or waits in the review queue) through the one activation
function, `memory.lifecycle.activation.memory_activate`, which the memory app registers here at
start-up (`activation_register`), so base-layer writers such as entry blocks reach it without
importing upwards. `memory_row_activate` is the one create path: the write service (routes
api_write, distiller, dreaming; skill lessons through it) and entry blocks (route entry_block)
store their new rows through it with their route name. The base layer owns the entry-block route
rule (`entry_block_goes_active`); the activation function extends it with strict anti-drift, the
conflict rule, the rule on retiring another agent's memory and the eval gate."""

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

from knowledge.memories.rows import memory_row_insert
from knowledge.models import Memory

ENTRY_BLOCK = "entry_block"  # the activation route of an entry's body block

_activate: Callable[..., str] | None = None


def entry_block_goes_active(actor) -> bool:
    """The route rule for entry blocks: people (console users, person tokens) and trusted agents
    write blocks that go into force; an untrusted agent's blocks wait in the review queue."""
    return not (actor.is_agent and not actor.agent.trusted)


def activation_register(activate: Callable[..., str]) -> None:
    """Set the one activation function (called once by the memory app when it is ready)."""
    global _activate
    _activate = activate


def memory_row_activate(
    *, actor, memory: Memory, route: str, sources=(), now=None, reason: str = ""
) -> Memory:
    """THE create path: store a new, queued memory row (memory_row_new; with its first version
    and sources; `reason` is the first version's) through the one activation function under
    `route`: it comes back active or queued (`memory.status`), as the route and the activation
    checks decide. Runs inside the caller's transaction; the caller audits the new row."""
    if _activate is None:
        raise ImproperlyConfigured("No activation function is registered (is the memory app installed?).")
    _activate(
        actor=actor,
        memory=memory,
        route=route,
        now=now,
        insert=lambda new: memory_row_insert(new, sources=sources, reason=reason),
    )
    return memory


def memory_row_activate_stored(*, actor, memory: Memory, route: str) -> Memory:
    """Pass a stored, queued, row-locked memory through the one activation function (a queued
    entry block that a person or trusted agent corrects goes into force this way, with every
    activation check). Runs inside the caller's transaction."""
    if _activate is None:
        raise ImproperlyConfigured("No activation function is registered (is the memory app installed?).")
    _activate(actor=actor, memory=memory, route=route)
    return memory
