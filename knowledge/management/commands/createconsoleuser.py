import os
import secrets

from django.core.management.base import BaseCommand, CommandError

from knowledge.errors import Invalid
from knowledge.principal import ROLES, Principal
from knowledge.principals import services


class Command(BaseCommand):
    help = "Create a console user (reviewer or admin) and print an API token for them last."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=ROLES, required=True)
        parser.add_argument("--password", help="default: $BRAIN_PASSWORD, else a generated one (printed)")

    def handle(self, *args, username, role, password, **options):
        password = password or os.environ.get("BRAIN_PASSWORD")
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        actor = Principal.system("manage.py")
        try:
            user = services.consoleuser_create(actor=actor, username=username, role=role, password=password)
        except Invalid as exc:
            raise CommandError(str(exc.detail))
        raw = services.token_create(actor=actor, user=user, label="createconsoleuser")
        self.stdout.write(f"Console user {user.username} created with role {role}.")
        if generated:
            self.stdout.write(f"Password (generated, shown once): {password}")
        self.stdout.write("API token (shown once):")
        self.stdout.write(raw)
