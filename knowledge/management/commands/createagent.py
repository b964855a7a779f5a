from django.core.management.base import BaseCommand, CommandError

from knowledge.errors import Invalid
from knowledge.principal import Principal
from knowledge.principals import services


class Command(BaseCommand):
    help = "Create an agent and print a new API token for it (the token is the last line)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--trusted", action="store_true", help="its writes go into force without review")
        parser.add_argument("--instructions", default="")

    def handle(self, *args, name, trusted, instructions, **options):
        actor = Principal.system("manage.py")
        try:
            agent = services.agent_create(
                actor=actor, name=name.lower(), trusted=trusted, instructions=instructions
            )
        except Invalid as exc:
            raise CommandError(str(exc.detail))
        raw = services.token_create(actor=actor, agent=agent, label="createagent")
        self.stdout.write(f"Agent {agent.name} created ({'trusted' if trusted else 'writes are reviewed'}).")
        self.stdout.write("API token (shown once):")
        self.stdout.write(raw)
