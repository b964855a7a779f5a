"""Hand-built statements for the hottest paths, generated from the models' own fields (so they
follow the models): one INSERT for a row and the rows that point at it (a memory with its first
version and its sources, an audit event with its revisions), an UPDATE of some fields of a row
(a memory's status), and plain SELECTs whose rows become model instances (the token of every
API request, the source registry rows of a write, the rows behind recall's results).

Why not the ORM: each statement the ORM compiles costs ≈ 0.5–1 ms of CPU here, and a memory
write made several; POST /api/memory must sustain hundreds of writes a second on two cores.
Values go through each field's `pre_save` and are sent exactly as `save()` would send them
(`get_db_prep_save`), and rows read
come back through `from_db_value` and `Model.from_db`, as the ORM builds them; no model of ours
has save() overrides or signal receivers on these paths."""

import datetime
import functools
import json
import math
import uuid

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.models.base import DEFERRED
from psycopg.types.json import Json, Jsonb


def _insert_fields(model) -> list[models.Field]:
    meta = model._meta
    return [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]


@functools.cache
def _writer(model) -> tuple[models.Field, ...]:
    """The insert fields of `model`."""
    return tuple(_insert_fields(model))


def _row(obj: models.Model, fields, parent_field: str | None, db) -> tuple[str, list]:
    """The VALUES tuple of one unsaved object; its `parent_field` column takes the parent's id."""
    sql, params = [], []
    for field in fields:
        if field.name == parent_field:
            sql.append("(SELECT id FROM parent)")
        else:
            sql.append("%s")
            params.append(field.get_db_prep_save(field.pre_save(obj, True), db))
    return f"({', '.join(sql)})", params


def _insert(model, objs, parent_field: str | None = None) -> tuple[str, list]:
    quote = connection.ops.quote_name
    fields = _writer(model)
    db = connections[DEFAULT_DB_ALIAS]  # not the proxy: each value asks it for its adapter
    rows, params = [], []
    for obj in objs:
        row_sql, row_params = _row(obj, fields, parent_field, db)
        rows.append(row_sql)
        params += row_params
    columns = ", ".join(quote(f.column) for f in fields)
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES {', '.join(rows)}", params


def insert_with_children(parent: models.Model, *children: tuple[str, list[models.Model]]) -> None:
    """Insert the unsaved `parent` and, in the same statement, each (fk field name, unsaved
    objects) group of rows whose foreign key points at it. Sets `parent.pk` (children's ids are
    not read back: callers that need them use the ORM)."""
    parent_sql, params = _insert(type(parent), [parent])
    ctes = [f"parent AS ({parent_sql} RETURNING id)"]
    for n, (fk, objs) in enumerate(children):
        if objs:
            child_sql, child_params = _insert(type(objs[0]), objs, parent_field=fk)
            ctes.append(f"child{n} AS ({child_sql})")
            params += child_params
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(ctes)} SELECT id FROM parent", params)
        parent.pk = cursor.fetchone()[0]
    parent._state.adding = False
    parent._state.db = connection.alias
    for fk, objs in children:
        for obj in objs:
            setattr(obj, obj._meta.get_field(fk).attname, parent.pk)


def insert_many(objs: list[models.Model]) -> None:
    """Insert unsaved instances of one model in one statement and set their pks, in order (a
    writer of many rows: an import's memories, their versions, sources and audit events). A
    foreign key assigned before its target was saved takes the target's id now. The values are
    prepared as save() prepares them and sent as one JSON document of rows
    (`json_populate_recordset`): as many placeholders as values cost the driver a third of an
    import's time to parse and quote, and bulk_create's column arrays escape every JSON document
    element by element. A value with no plain JSON form sends the rows as VALUES instead."""
    if not objs:
        return
    for obj in objs:
        obj._prepare_related_fields_for_save(operation_name="insert_many")
    model = type(objs[0])
    quote = connection.ops.quote_name
    table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
    fields = _writer(model)
    db = connections[DEFAULT_DB_ALIAS]
    names = [json.dumps(f.column) for f in fields]
    rows = []
    for obj in objs:
        values = [_json_text(f.get_db_prep_save(f.pre_save(obj, True), db)) for f in fields]
        if None in values:
            rows = None
            break
        rows.append("{" + ",".join(f"{n}:{v}" for n, v in zip(names, values, strict=True)) + "}")
    if rows is None:
        sql, params = _insert(model, objs)
    else:
        columns = ", ".join(quote(f.column) for f in fields)
        sql = f"INSERT INTO {table} ({columns}) SELECT {columns} FROM json_populate_recordset(NULL::{table}, %s)"
        params = ["[" + ",".join(rows) + "]"]
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} RETURNING {pk}", params)
        ids = [row[0] for row in cursor.fetchall()]
    for obj, new_id in zip(objs, ids, strict=True):
        obj.pk = new_id
        obj._state.adding = False
        obj._state.db = connection.alias


def _json_text(value) -> str | None:
    """A prepared value as JSON for json_populate_recordset (JSON null is SQL NULL; a jsonb
    column takes the document itself, any other column the text its type reads), or None."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return json.dumps(value)
    if isinstance(value, float):
        return json.dumps(value) if math.isfinite(value) else None
    if isinstance(value, Json | Jsonb):
        return (value.dumps or json.dumps)(value.obj)
    if isinstance(value, datetime.datetime | datetime.date):
        return json.dumps(value.isoformat())
    if isinstance(value, uuid.UUID):
        return json.dumps(str(value))
    return None


def update_fields(obj: models.Model, *names: str) -> None:
    """`obj.save(update_fields=names)`, as one plain UPDATE (auto_now fields are set by their
    `pre_save` as save() would; name them to have them written)."""
    quote = connection.ops.quote_name
    fields = [obj._meta.get_field(name) for name in names]
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    params = [f.get_db_prep_save(f.pre_save(obj, False), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(obj._meta.db_table)} SET {assignments} WHERE {quote(obj._meta.pk.column)} = %s",
            [*params, obj.pk],
        )


@functools.cache
def _loaded(model, defer=()) -> tuple[models.Field, ...]:
    """The fields `columns` selects (kept per model and `defer`: recall builds hundreds of rows
    per search)."""
    return tuple(f for f in model._meta.concrete_fields if f.name not in defer)


@functools.cache
def _reader(model, defer=()) -> tuple[int, tuple[int, ...], tuple]:
    """How `from_row` places a row: (number of concrete fields, the position of each value
    selected, (position, converter) of the fields the ORM converts on reading)."""
    concrete = model._meta.concrete_fields
    slots = tuple(i for i, f in enumerate(concrete) if f.name not in defer)
    converters = tuple((i, concrete[i].from_db_value) for i in slots if hasattr(concrete[i], "from_db_value"))
    return len(concrete), slots, converters


def width(model, defer=()) -> int:
    """How many values `columns(model, …, defer)` selects."""
    return len(_loaded(model, tuple(defer)))


def columns(model, alias: str, defer=()) -> str:
    """The concrete columns of `model` in field order, qualified by `alias` (for `from_row`),
    leaving out the fields named in `defer`."""
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(f.column)}" for f in _loaded(model, tuple(defer)))


def from_row(model, values, defer=()) -> models.Model:
    """An instance from the values of `columns(model, …, defer)`, as the ORM would build it
    (fields in `defer` are deferred: read from the database if ever used)."""
    size, slots, converters = _reader(model, tuple(defer))
    if len(values) != len(slots):
        raise ValueError(f"{model.__name__}: {len(values)} values for {len(slots)} columns")
    if len(slots) == size:
        row = list(values)
    else:
        row = [DEFERRED] * size
        for i, value in zip(slots, values, strict=True):
            row[i] = value
    for i, convert in converters:
        row[i] = convert(row[i], None, connection)
    return model.from_db(connection.alias, None, row)  # a full row: no field names needed


def select(model, where: str, params, defer=()) -> list[models.Model]:
    """Instances of `model` whose rows (table aliased `t`) match `where` (fields in `defer`
    deferred)."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns(model, 't', defer)} FROM {quote(model._meta.db_table)} t WHERE {where}", params
        )
        return [from_row(model, row, defer) for row in cursor.fetchall()]
