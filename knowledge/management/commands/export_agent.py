import sys

from django.core.management.base import BaseCommand, CommandError

from knowledge import names
from knowledge.portability.services import agent_export
from knowledge.principal import Principal


class Command(BaseCommand):
    help = "Write one agent's knowledge as a versioned JSON Lines file (to stdout, or --output FILE)."

    def add_arguments(self, parser):
        parser.add_argument("agent")
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")

    def handle(self, *args, agent, output=None, **options):
        found = names.owner_selected(agent)
        if found is None:
            raise CommandError(f"There is no agent named {agent}.")
        lines = agent_export(actor=Principal.system("manage.py"), agent=found)
        if output:
            with open(output, "w", encoding="utf-8") as f:
                f.writelines(lines)
            self.stderr.write(f"{len(lines)} lines written to {output}.")
        else:
            sys.stdout.writelines(lines)
