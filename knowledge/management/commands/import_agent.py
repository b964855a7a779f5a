from django.core.management.base import BaseCommand, CommandError

from knowledge.errors import DomainError
from knowledge.portability.services import agent_import
from knowledge.principal import Principal


class Command(BaseCommand):
    help = (
        "Import a file written by export_agent. The whole file is checked first: on any bad line "
        "nothing is written. Importing the same file twice changes nothing. An existing agent's "
        "memo and guide are kept unless --replace; under another name the shared and channel "
        "stores are left alone unless --with-shared; --dry-run says what would happen."
    )

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--as", dest="as_name", default="", help="import into this agent instead")
        parser.add_argument("--replace", action="store_true", help="overwrite the agent's own memo and guide")
        parser.add_argument(
            "--with-shared",
            action="store_true",
            help="under another name, import the file's shared and channel stores too",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="say what would be imported; write nothing"
        )

    def handle(self, *args, file, as_name="", replace=False, with_shared=False, dry_run=False, **options):
        try:
            with open(file, "rb") as f:
                result = agent_import(
                    actor=Principal.system("manage.py"),
                    lines=f,
                    as_name=as_name,
                    replace=replace,
                    with_shared=with_shared,
                    preview=dry_run,
                )
        except OSError as exc:
            raise CommandError(str(exc)) from None
        except DomainError as exc:
            detail = exc.detail if isinstance(exc.detail, dict) else {"file": [str(exc.detail)]}
            raise CommandError(
                "\n".join(m for messages in detail.values() for m in messages) + "\nNothing was imported."
            ) from None
        written = (
            ", ".join(f"{n} {kind}" for kind, n in result["written"].items() if n)
            or "nothing (already there)"
        )
        into = f"{result['agent']}{' (new)' if result['new_agent'] else ''}"
        self.stdout.write(f"{'Would import' if dry_run else 'Imported'} into {into}: {written}.")
        for store, n in result["by_store"].items():
            self.stdout.write(f"  {store}: {n} memories")
        if result["queued"]:
            self.stdout.write(f"  {result['queued']} of them wait for review.")
        present, left_out = result["present"], result["left_out"]
        if any(present.values()):
            self.stdout.write(
                f"  already present (skipped): {present['memories']} memories, {present['entries']} entries"
            )
        if any(left_out.values()):
            self.stdout.write(
                f"  left out, shared and channel stores (--with-shared): {left_out['memories']} memories, "
                f"{left_out['entries']} entries"
            )
        if result["erased"]:
            self.stdout.write(
                f"  erased here (the erasure ledger), not brought back: {result['erased']} memories"
            )
        for kept in result["kept"]:
            self.stdout.write(
                f"  did not write the file's {kept} into the existing agent (--replace writes it)"
            )
        if dry_run:
            self.stdout.write("Dry run: nothing was written.")
