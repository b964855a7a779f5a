"""django-q2 entry points for the foundation."""

from django.utils import timezone

from knowledge.models import Heartbeat


def worker_heartbeat() -> None:
    """Runs every minute on the worker; /healthz reports how long ago it last ran."""
    Heartbeat.objects.update_or_create(name="worker", defaults={"beat_at": timezone.now()})


def term_stats_compact() -> int:
    """Hourly: fold the keyword statistics' change rows (knowledge.termstats); no sum changes."""
    from knowledge.termstats import term_stats_compact as compact

    return compact()
