"""Set-wise writes for plans that touch tens of thousands of memories: COPY instead of
parameter lists (client-side quoting of large text arrays is what is slow). Callers run these
inside their transaction."""

from django.db import connection


def copy_rows(table: str, columns: list[str], rows) -> None:
    """COPY rows (tuples in `columns` order; JSON as str) into `table`."""
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


def allocate_ids(table: str, count: int) -> list[int]:
    """Take `count` ids from a table's id sequence, so COPYed rows can be referred to."""
    if count == 0:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [table, count]
        )
        return [row[0] for row in cursor.fetchall()]
