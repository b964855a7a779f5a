from django.core.management.base import BaseCommand, CommandError

from knowledge.errors import DomainError
from knowledge.portability.services import agent_import
from knowledge.principal import Principal


class Command(BaseCommand):
    help = (
        "Import a file written by export_agent. The whole file is checked first: on any bad line "
        "nothing is written. Importing the same file twice changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--as", dest="as_name", default="", help="import into this agent instead")

    def handle(self, *args, file, as_name="", **options):
        try:
            with open(file, "rb") as f:
                result = agent_import(actor=Principal.system("manage.py"), lines=f, as_name=as_name)
        except OSError as exc:
            raise CommandError(str(exc)) from None
        except DomainError as exc:
            detail = exc.detail if isinstance(exc.detail, dict) else {"file": [str(exc.detail)]}
            raise CommandError("\n".join(m for messages in detail.values() for m in messages)) from None
        written = (
            ", ".join(f"{n} {kind}" for kind, n in result["written"].items() if n)
            or "nothing (already there)"
        )
        self.stdout.write(f"Imported into {result['agent']}: {written}.")
