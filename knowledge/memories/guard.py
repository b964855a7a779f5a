"""The database's guard on memory rows: a statement trigger on knowledge_memory (migration
`0029_memory_writer_guard`) refuses every INSERT and every UPDATE of `status` unless the
transaction-local setting `brain.memory_writer` is on, and only this package turns it on — around
its own statements, and off again before it returns. So raw SQL, a queryset helper in another
module or a future module cannot create a memory row or change its state: PostgreSQL says no
(SQLSTATE 42501), whatever the Python.

Bulk seeding outside the product (benchmarks building a world) opens the same door with
`memory_rows_guard()`, the one way in."""

import functools
from contextlib import contextmanager, nullcontext

from django.db import DatabaseError, connection, transaction

SETTING = "brain.memory_writer"


def _set(value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [SETTING, value])


@contextmanager
def memory_rows_guard():
    """Open the guard for the statements inside (in a transaction: the caller's, or one of its
    own), and close it on the way out. Nested uses open it once."""
    if getattr(connection, "brain_memory_writer", False):
        yield
        return
    with transaction.atomic() if not connection.in_atomic_block else nullcontext():
        _set("on")
        connection.brain_memory_writer = True
        try:
            yield
        finally:
            connection.brain_memory_writer = False
            try:
                _set("off")
            except DatabaseError:  # the transaction failed inside: it is rolled back, setting and all
                pass


def writes_memory_rows(function):
    """The guard around one of this package's writers."""

    @functools.wraps(function)
    def guarded(*args, **kwargs):
        with memory_rows_guard():
            return function(*args, **kwargs)

    return guarded
