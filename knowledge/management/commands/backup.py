from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from knowledge.backup import BackupError, backup_write


class Command(BaseCommand):
    help = (
        "Write one archive of Brain (a consistent pg_dump of its database plus every material "
        "original, with a manifest of row counts and sha256s) to PATH, while Brain runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="the archive to write, e.g. brain-2026-12-01.tar")

    def handle(self, *args, path: Path, **options):
        if path.exists() and path.is_dir():
            raise CommandError(f"{path} is a folder; name the archive file to write.")
        try:
            result = backup_write(path)
        except BackupError as exc:
            raise CommandError(str(exc))
        self.stdout.write(
            f"Wrote {result.path}: {result.tables} tables, {result.rows:,} rows, {result.originals} original(s)."
        )
        if result.missing:
            self.stderr.write(
                f"{len(result.missing)} original(s) the database refers to are missing from the storage and "
                f"are not in the archive: {', '.join(result.missing[:10])}"
            )
