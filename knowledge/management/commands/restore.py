from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from knowledge.backup import BackupError, restore_read
from knowledge.erasure.ledger import ledger_file_merge, ledger_tables_exist
from knowledge.erasure.services import erasure_ledger_reapply
from knowledge.principal import Principal


class Command(BaseCommand):
    help = (
        "Restore an archive written by `manage.py backup` into the configured database and material "
        "storage. The whole archive is checked first (manifest, paths, sizes, sha256s, the dump "
        "readable by pg_restore) and a damaged one touches nothing. Both must be empty (a new data "
        "directory or database) unless --force is given; afterwards every row count and every "
        "original's sha256 is checked against the manifest."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument(
            "--force",
            action="store_true",
            help="replace a database that has tables (its public schema is dropped) and originals at the same paths",
        )

    def handle(self, *args, path: Path, force: bool, **options):
        if not path.is_file():
            raise CommandError(f"{path} is not a file.")
        try:
            result = restore_read(path, force=force)
        except BackupError as exc:
            raise CommandError(str(exc))
        self.stdout.write(
            f"Restored {path}: {result.tables} tables, {result.rows:,} rows, {result.originals} original(s); "
            "every count and checksum matches the backup. Run `manage.py migrate` if this Brain is newer."
        )
        # What was erased after the backup was taken stays erased (knowledge.erasure).
        if not ledger_tables_exist():
            self.stdout.write(
                "This backup predates the erasure ledger: run `manage.py migrate`, then "
                "`manage.py erase --reapply`, before Brain serves it."
            )
            return
        merged = ledger_file_merge()
        taken = erasure_ledger_reapply(actor=Principal.system("restore"))
        self.stdout.write(
            f"Erasure ledger re-applied: {merged} tombstone(s) from the ledger file, "
            + ", ".join(f"{n} {kind}" for kind, n in taken.items())
            + " erased again."
        )
