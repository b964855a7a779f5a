from django.core.management.base import BaseCommand, CommandError

from knowledge.errors import Invalid
from knowledge.principal import Principal
from knowledge.principals import services


class Command(BaseCommand):
    help = "Create an integration (pushes source state, reads no memory) and print its token last."

    def add_arguments(self, parser):
        parser.add_argument("name")

    def handle(self, *args, name, **options):
        actor = Principal.system("manage.py")
        try:
            integration = services.integration_create(actor=actor, name=name.lower())
        except Invalid as exc:
            raise CommandError(str(exc.detail))
        raw = services.token_create(actor=actor, integration=integration, label="createintegration")
        self.stdout.write(f"Integration {integration.name} created.")
        self.stdout.write("API token (shown once):")
        self.stdout.write(raw)
