"""Restore checks the whole archive before it touches the database or the material storage: a
tampered archive (a sha256 or size that differs, a `../` or absolute path, a member the manifest
does not list, a malformed manifest, a dump pg_restore cannot read) is refused with a message
naming the problem, and the database and storage are as they were — even with --force. The full
backup → restore drill is tests/ops/test_backup.py; these archives are built by hand."""

import hashlib
import io
import json
import subprocess
import tarfile

import pytest
from django.core.management import CommandError, call_command

from knowledge.backup import DUMP, FORMAT, MANIFEST, _client, pg_bin, table_counts
from knowledge.materials.storage import material_storage
from knowledge.models import Agent

pytestmark = pytest.mark.django_db

ORIGINAL = "7/v1-0123456789abcdef"
BYTES = b"The NAS keeps 30 nightly snapshots.\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build(path, *, dump=b"PGDMP not really", originals=None, edit=None, members=None, manifest=True):
    """An archive shaped as `manage.py backup` writes it; `edit(manifest)` changes the manifest,
    `members` replaces what is archived under each name (None: left out)."""
    originals = {ORIGINAL: BYTES} if originals is None else originals
    listed = {
        "format": FORMAT,
        "created_at": "2026-01-01T00:00:00+00:00",
        "database": {"file": DUMP, "sha256": sha(dump), "size": len(dump), "migrations": {}},
        "counts": {"knowledge_agent": 1},
        "materials": {
            "storage": "django.core.files.storage.FileSystemStorage",
            "originals": [
                {"path": p, "sha256": sha(d), "recorded_sha256": sha(d), "size": len(d), "material": 7}
                for p, d in originals.items()
            ],
            "missing": [],
        },
    }
    if edit:
        edit(listed)
    contents = {DUMP: dump, **{f"materials/{p}": d for p, d in originals.items()}}
    if manifest:
        contents[MANIFEST] = json.dumps(listed).encode()
    contents.update(members or {})
    with tarfile.open(path, "w") as tar:
        for name, data in contents.items():
            if data is None:
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _symlink(path):
    build(path)
    with tarfile.open(path, "a") as tar:
        link = tarfile.TarInfo("materials/7/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    return path


TAMPERED = {
    "an original's sha256": (
        lambda p: build(p, members={f"materials/{ORIGINAL}": BYTES.replace(b"30", b"99")}),
        f"materials/{ORIGINAL}: its sha256 differs from the manifest's",
    ),
    "the dump's sha256": (
        lambda p: build(p, edit=lambda m: m["database"].update(sha256="0" * 64)),
        "database.dump: its sha256 differs from the manifest's",
    ),
    "an original's size": (
        lambda p: build(p, edit=lambda m: m["materials"]["originals"][0].update(size=3)),
        f"materials/{ORIGINAL}: 36 bytes, the manifest says 3",
    ),
    "a ../ path": (
        lambda p: build(p, originals={"../../escaped.txt": BYTES}),
        "path '../../escaped.txt' is not a relative path inside the storage",
    ),
    "an absolute path": (
        lambda p: build(p, originals={"/tmp/escaped.txt": BYTES}),
        "path '/tmp/escaped.txt' is not a relative path inside the storage",
    ),
    "a ../ member the manifest does not list": (
        lambda p: build(p, members={"../escaped.txt": BYTES}),
        "'../escaped.txt': not a relative path inside the archive",
    ),
    "a member the manifest does not list": (
        lambda p: build(p, members={"materials/8/v1-extra": BYTES}),
        "materials/8/v1-extra: not listed in the manifest",
    ),
    "a listed original left out": (
        lambda p: build(p, members={f"materials/{ORIGINAL}": None}),
        f"materials/{ORIGINAL}: listed in the manifest, missing from the archive",
    ),
    "a symlink": (_symlink, "materials/7/link: not a regular file"),
    "no manifest": (lambda p: build(p, manifest=False), "not a Brain backup (no readable manifest.json)"),
    "a manifest with no list of originals": (
        lambda p: build(p, edit=lambda m: m["materials"].pop("originals")),
        "The manifest is malformed: materials: must list the originals",
    ),
    "a manifest sha256 that is not one": (
        lambda p: build(p, edit=lambda m: m["database"].update(sha256="x")),
        "database: sha256 must be 64 hexadecimal digits",
    ),
    "a dump pg_restore cannot read": (
        lambda p: build(p),
        "database.dump is not a dump pg_restore can read; nothing was restored",
    ),
}


@pytest.mark.parametrize("tampered", list(TAMPERED))
def test_a_tampered_archive_is_refused_and_the_database_and_storage_are_untouched(tampered, tmp_path, world):
    make, told = TAMPERED[tampered]
    archive = make(tmp_path / "brain.tar")
    storage = material_storage()
    counts = table_counts()
    with pytest.raises(CommandError) as refused:
        call_command("restore", str(archive), "--force")
    assert told in str(refused.value)
    # Nothing dropped, nothing restored, nothing stored — neither in the storage nor above it.
    assert table_counts() == counts
    assert Agent.objects.filter(name="copilot").exists()
    assert not storage.exists(ORIGINAL)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path.parent / "escaped.txt").exists()


def test_an_archive_as_backup_writes_it_passes_the_check(tmp_path, db):
    """A real (small) dump and an original: archive_check reads it whole and returns the
    manifest, the dump copied out for pg_restore."""
    from knowledge.backup import archive_check

    args, env = _client()
    dump = tmp_path / "one-table.dump"
    subprocess.run(
        [
            str(pg_bin() / "pg_dump"),
            "--format=custom",
            "--schema-only",
            "-t",
            "django_migrations",
            "-f",
            str(dump),
            *args,
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    archive = build(tmp_path / "brain.tar", dump=dump.read_bytes())
    copied = tmp_path / "copied.dump"
    with tarfile.open(archive) as tar:
        manifest = archive_check(tar, copied)
    assert manifest["materials"]["originals"][0]["path"] == ORIGINAL
    assert copied.read_bytes() == dump.read_bytes()
