import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from knowledge.principal import Principal
from knowledge.principals import services


class Command(BaseCommand):
    help = "First run only: create the `admin` console user (password from BRAIN_ADMIN_PASSWORD, else generated and printed once)."

    def handle(self, *args, **options):
        User = get_user_model()
        if User.objects.filter(username="admin").exists():
            self.stdout.write(
                "Log in as admin with the password printed on the first run "
                "(or set one: python manage.py changepassword admin)."
            )
            return
        password = os.environ.get("BRAIN_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        services.consoleuser_create(
            actor=Principal.system("make run"), username="admin", role="admin", password=password
        )
        if os.environ.get("BRAIN_ADMIN_PASSWORD"):
            self.stdout.write("Created admin account: log in as admin with BRAIN_ADMIN_PASSWORD.")
        else:
            self.stdout.write(f"Created admin account: log in as admin / {password}  (shown only now)")
