from django.core.management.base import BaseCommand

from knowledge.models import Agent


class Command(BaseCommand):
    help = "Print 'empty' when no agent exists yet (make run uses it to offer the demo data)."

    def handle(self, *args, **options):
        self.stdout.write("empty" if not Agent.objects.exists() else "not empty")
