from django.core.management import call_command

from knowledge.models import Agent, AuditEvent, Memory


def test_seed_demo_is_idempotent_and_shows_a_stale_memory(db):
    call_command("seed_demo")
    counts = (Agent.objects.count(), Memory.objects.count(), AuditEvent.objects.count())
    call_command("seed_demo")
    assert (Agent.objects.count(), Memory.objects.count(), AuditEvent.objects.count()) == counts
    stale = Memory.objects.get(stale=True)
    assert stale.stale_reason == "re-check: its source ticket:INC-31 changed"
