"""Links between memories as a plan writes them: applying a plan's link groups inserts each link
in both directions (a link that already exists is left as it is and stays the other plan's);
reverting the plan removes exactly the links it inserted. Set-wise SQL, inside the caller's
transaction."""

from django.db import connection

from memory.models import MemoryLink

T_LINK = MemoryLink._meta.db_table


def links_apply(*, plan, now) -> int:
    """Insert the links of `plan`'s link groups, both ways. Returns how many rows were added."""
    rows = [
        (group.target_id, int(neighbour), float(similarity))
        for group in plan.groups.filter(kind="link").order_by("id")
        for neighbour, similarity in group.data.get("links", [])
    ]
    if not rows:
        return 0
    a = [r[0] for r in rows] + [r[1] for r in rows]
    b = [r[1] for r in rows] + [r[0] for r in rows]
    sims = [r[2] for r in rows] * 2
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {T_LINK} (memory_id, neighbour_id, similarity, plan_id, created_at)
                SELECT v.a, v.b, v.s, %s, %s
                FROM unnest(%s::bigint[], %s::bigint[], %s::float8[]) WITH ORDINALITY AS v(a, b, s, n)
                WHERE v.a <> v.b
                ORDER BY v.n
                ON CONFLICT (memory_id, neighbour_id) DO NOTHING""",
            [plan.pk, now, a, b, sims],
        )
        return cursor.rowcount


def links_revert(*, plan) -> int:
    """Remove the links `plan` inserted. Returns how many rows were removed."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {T_LINK} WHERE plan_id = %s", [plan.pk])
        return cursor.rowcount
