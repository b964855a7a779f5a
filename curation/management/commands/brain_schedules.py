from django.core.management.base import BaseCommand
from django.utils import timezone
from django_q.models import Schedule

from curation.schedules import schedule_table


class Command(BaseCommand):
    help = "Create or update Brain's django-q2 schedules (safe to run any number of times)."

    def handle(self, *args, **options):
        names = []
        for name, func, minutes in schedule_table():
            names.append(name)
            _, created = Schedule.objects.update_or_create(
                name=name,
                defaults={"func": func, "schedule_type": Schedule.MINUTES, "minutes": minutes, "repeats": -1},
            )
            if created:
                Schedule.objects.filter(name=name).update(next_run=timezone.now())
            self.stdout.write(f"{'created' if created else 'updated'} schedule: {name} (every {minutes} min)")
        # One-off schedules are jobs deferred by an outage (knowledge.llm.outage): not ours to remove.
        removed, _ = Schedule.objects.exclude(name__in=names).exclude(schedule_type=Schedule.ONCE).delete()
        if removed:
            self.stdout.write(f"removed {removed} old schedule(s)")
