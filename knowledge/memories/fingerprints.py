"""Fingerprints: what a memory's sources looked like when it was written.

A fingerprint covers exactly the fields whose change matters for the source's kind:

| kind         | fingerprinted                                             | also counts as a change |
|--------------|-----------------------------------------------------------|-------------------------|
| ticket       | title, description, status, resolution, category          | deleted                 |
| kb           | text, resolution                                          | removed                 |
| record       | all its fields (ref is source/type/id)                    | deleted by its source   |
| memory       | whether it is live or superseded / rejected / invalidated | row gone                |
| entry        | name, summary, properties and active block text (its projection) | removed          |
| message      | its text                                                  | deleted                 |
| material     | the current version's label and sha256                    | withdrawn, removed      |
| conversation | nothing — a finished conversation never changes           |                         |
| task_outcome | nothing — a task outcome is immutable evidence            |                         |

External kinds (ticket, kb, record) are compared with the state their owning system last pushed
(SourceState); internal kinds with our own tables, by SQL that computes the same fingerprint at
write time and at check time (memory.provenance)."""

import hashlib
import json

from django.db import connection

from knowledge import rowsql
from knowledge.models import MemorySource, SourceState

EXTERNAL_KINDS = ("ticket", "kb", "record")
FINGERPRINT_FIELDS = {
    "ticket": ("title", "description", "status", "resolution", "category"),
    "kb": ("text", "resolution"),
    "record": None,  # every field
}
# Every field an external source's state may carry: the fingerprinted ones and the ones kept
# for people to read but whose change never makes a memory stale. A field outside these is a
# 400 (a misspelt `resolutoin` would otherwise silently drop out of the fingerprint). A record
# is structured data of any shape: all its fields count.
STATE_FIELDS = {
    "ticket": FINGERPRINT_FIELDS["ticket"]
    + ("assignee", "priority", "requester", "tags", "url", "created_at", "updated_at"),
    "kb": FINGERPRINT_FIELDS["kb"] + ("title", "tags", "url", "created_at", "updated_at"),
    "record": None,
}
NEVER_CHANGES = ("conversation", "task_outcome")
MAX_STATE_BYTES = 64 * 1024


def validate_ref(kind: str, ref: str) -> str | None:
    """A message saying what is wrong with this source reference, or None."""
    if kind not in dict(MemorySource._meta.get_field("kind").choices):
        return f"Unknown source kind {kind!r}."
    if not ref or len(ref) > 300:
        return "A source ref must have 1 to 300 characters."
    if kind == "record" and (ref.count("/") != 2 or not all(ref.split("/"))):
        return "A record ref is source/type/id."
    if kind == "material":
        base, _, section = ref.partition("#")
        connector, colon, document = base.partition(":")
        if not (base.isdigit() or (colon and connector and document)) or (section and not section.isdigit()):
            return "A material ref is its id or <connector>:<ref>, optionally with #<section>."
    if kind in ("memory", "entry", "message", "conversation", "task_outcome") and not ref.isdigit():
        return f"A {kind} ref is its numeric id."
    return None


def fingerprint_fields(kind: str, fields: dict) -> dict:
    """The subset of `fields` whose change matters for `kind`."""
    wanted = FINGERPRINT_FIELDS.get(kind)
    if wanted is None:
        return dict(fields)
    return {name: fields.get(name) for name in wanted}


def fingerprint(kind: str, fields: dict) -> str:
    payload = json.dumps(fingerprint_fields(kind, fields), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


# SQL that yields (ref, fingerprint, fields) for internal sources. %(refs)s is a text[] of refs,
# or NULL for "every ref cited by some memory source of this kind".
INTERNAL_SQL = {
    "message": """
        SELECT m.id::text AS ref, md5(m.text) AS fingerprint, jsonb_build_object('text', m.text) AS fields
        FROM knowledge_message m
        WHERE m.id::text = ANY(%(refs)s)
    """,
    "memory": """
        SELECT m.id::text AS ref,
               md5(CASE WHEN m.status IN ('superseded', 'rejected', 'invalidated') THEN m.status
                        ELSE 'live' END) AS fingerprint,
               jsonb_build_object('status', CASE WHEN m.status IN ('superseded', 'rejected', 'invalidated')
                                                 THEN m.status ELSE 'live' END) AS fields
        FROM knowledge_memory m
        WHERE m.id::text = ANY(%(refs)s)
    """,
    # A material is cited by its id or, for a connector document, `<connector>:<ref>`; a block
    # learned from one section adds `#<n>`. Every ref form of a material answers with the same
    # fingerprint, so a new version makes them all stale at once; a withdrawn one is gone.
    "material": """
        SELECT c.ref AS ref, md5(v.label || chr(31) || v.sha256) AS fingerprint,
               jsonb_build_object('title', mt.title, 'version', v.number, 'label', v.label,
                                  'sha256', v.sha256) AS fields
        FROM knowledge_material mt
        JOIN knowledge_materialversion v ON v.id = mt.version_id
        CROSS JOIN LATERAL (
            SELECT (CASE WHEN mt.connector = '' THEN mt.id::text ELSE mt.connector || ':' || mt.external_ref END)
                   || CASE WHEN n = 0 THEN '' ELSE '#' || n END AS ref
            FROM generate_series(0, v.sections) n
        ) c
        WHERE mt.withdrawn_at IS NULL AND c.ref = ANY(%(refs)s)
    """,
    "entry": """
        SELECT e.id::text AS ref,
               md5(concat_ws(chr(31), e.name, e.summary, e.properties::text, b.text)) AS fingerprint,
               jsonb_build_object('name', e.name, 'summary', e.summary, 'properties', e.properties,
                                  'text', b.text) AS fields
        FROM knowledge_entry e
        LEFT JOIN LATERAL (
            SELECT coalesce(string_agg(x.text, chr(30) ORDER BY x.position, x.id), '') AS text
            FROM knowledge_memory x WHERE x.entry_id = e.id AND x.status = 'active'
        ) b ON true
        WHERE e.id::text = ANY(%(refs)s)
    """,
}


def internal_states(kind: str, refs: list[str]) -> dict[str, tuple[str, dict]]:
    """{ref: (fingerprint, fields)} for the internal sources that exist; missing refs are gone."""
    sql = INTERNAL_SQL.get(kind)
    if sql is None or not refs:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(sql, {"refs": list(refs)})
        return {
            ref: (fp, fields if isinstance(fields, dict) else json.loads(fields))
            for ref, fp, fields in cursor.fetchall()
        }


def external_states(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], SourceState]:
    """The registry rows for these (kind, ref) pairs, in one query."""
    if not pairs:
        return {}
    wanted = set(pairs)
    rows = rowsql.select(  # plain SQL: this runs in every write that cites an outside source
        SourceState, "t.kind = ANY(%s) AND t.ref = ANY(%s)", [[k for k, _ in wanted], [r for _, r in wanted]]
    )
    return {(s.kind, s.ref): s for s in rows if (s.kind, s.ref) in wanted}


def source_states(sources) -> tuple[dict, dict]:
    """The current state of every source in `sources` as source_rows reads it: (registry rows of
    the outside ones, fingerprints of the internal ones by kind), at most one query per kind —
    for one memory's sources, or those of many memories written together."""
    pairs = {(source["kind"], str(source["ref"])) for source in sources if "recorded" not in source}
    registry = external_states([pair for pair in pairs if pair[0] in EXTERNAL_KINDS])
    internal: dict[str, dict] = {}
    for kind in {k for k, _ in pairs if k in INTERNAL_SQL}:
        internal[kind] = internal_states(kind, [r for k, r in pairs if k == kind])
    return registry, internal


def source_rows(memory, sources, states: tuple[dict, dict] | None = None) -> list[MemorySource]:
    """Unsaved MemorySource rows for `sources` ({"kind", "ref", optional "state": {...}}), each
    with the fingerprint of its source as it is now (`states`, from source_states, when the
    caller looked them up for many memories at once). A source carrying its state inline that we
    knew nothing about becomes the registry's baseline; an unknown one without state is
    recorded *untracked* and gets its baseline when its state is first pushed. A source carried
    over from another memory (a consolidation merge) brings its `recorded` fingerprint, snapshot
    and state, kept as they were."""
    unique = {}
    for source in sources:
        unique.setdefault((source["kind"], str(source["ref"])), source)
    registry, internal = states if states is not None else source_states(unique.values())

    rows = []
    for (kind, ref), source in unique.items():
        row = MemorySource(memory=memory, kind=kind, ref=ref)
        if "recorded" in source:
            for name, value in source["recorded"].items():
                setattr(row, name, value)
            rows.append(row)
            continue
        inline = source.get("state")
        if kind in EXTERNAL_KINDS:
            known = registry.get((kind, ref))
            if inline is not None:
                row.fingerprint, row.snapshot = fingerprint(kind, inline), fingerprint_fields(kind, inline)
                if known is None:
                    SourceState.objects.get_or_create(
                        kind=kind,
                        ref=ref,
                        defaults={"fields": inline, "fingerprint": row.fingerprint, "pushed_by": "inline"},
                    )
            elif known is not None and not known.deleted:
                row.fingerprint, row.snapshot = known.fingerprint, fingerprint_fields(kind, known.fields)
            else:
                row.state = MemorySource.UNTRACKED
        elif kind in internal:
            current = internal[kind].get(ref)
            if current is None:
                row.state = MemorySource.UNTRACKED
            else:
                row.fingerprint, row.snapshot = current
        elif kind not in NEVER_CHANGES:
            row.state = MemorySource.UNTRACKED
        rows.append(row)
    return rows
