"""The erasure ledger's copy outside the database (settings.BRAIN_ERASURE_LEDGER): one JSON line
per tombstone — erasure id, when, kind, ref, content hash; never text. A restore replaces the
database and with it the database's ledger, so `ledger_file_merge` puts back every tombstone the
file holds that the restored database lacks, and `services.erasure_ledger_reapply` takes their
content again. Appended after each erasure commits (a rolled-back erasure leaves no line)."""

import json
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from knowledge.models import ErasedItem, Erasure


def ledger_path() -> Path:
    return Path(settings.BRAIN_ERASURE_LEDGER)


def ledger_file_lines(erasure: Erasure, items: list[ErasedItem]) -> list[str]:
    head = {"erasure": erasure.pk, "at": erasure.created_at.isoformat(), "of": erasure.kind}
    return [json.dumps({**head, "kind": i.kind, "ref": i.ref, "hash": i.content_hash}) for i in items]


def ledger_file_append(lines: list[str]) -> None:
    """Append the lines (on commit of the erasure that made them)."""
    if not lines:
        return
    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")


def ledger_file_read() -> list[dict]:
    path = ledger_path()
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # a line cut by a crash mid-append: the rest still counts
            continue
    return rows


def ledger_tables_exist() -> bool:
    return ErasedItem._meta.db_table in connection.introspection.table_names()


def ledger_file_merge() -> int:
    """Put every tombstone of the file that the database lacks back into the database's ledger
    (under one 'restored ledger' erasure). Returns how many it added."""
    rows = ledger_file_read()
    if not rows:
        return 0
    with transaction.atomic():
        have = set(ErasedItem.objects.values_list("kind", "ref"))
        missing = {
            (r["kind"], str(r["ref"])): r.get("hash", "")
            for r in rows
            if (r["kind"], str(r["ref"])) not in have
        }
        if not missing:
            return 0
        erasure = Erasure.objects.create(
            kind=Erasure.RESTORED,
            target="ledger file",
            actor_kind="system",
            actor_name="restore",
            reason=f"tombstones from {ledger_path().name} the restored database lacked",
            counts={"items": len(missing)},
        )
        ErasedItem.objects.bulk_create(
            [ErasedItem(erasure=erasure, kind=k, ref=r, content_hash=h) for (k, r), h in missing.items()],
            batch_size=2000,
            ignore_conflicts=True,
        )
    return len(missing)
