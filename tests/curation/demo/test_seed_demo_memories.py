from django.core.management import call_command

from knowledge.models import AuditEvent, Memory


def test_seed_demo_writes_memories_in_every_state_once(db):
    call_command("seed_demo", verbosity=0)
    count, events = Memory.objects.count(), AuditEvent.objects.count()
    assert set(Memory.objects.values_list("status", flat=True)) == {s for s, _ in Memory.STATUSES}
    reasons = set(Memory.objects.filter(status=Memory.QUEUED).values_list("queue_reason", flat=True))
    assert reasons == {"new", "requeued", "merge", "gate", "conflict"}
    assert Memory.objects.filter(stale=True).exists()
    assert Memory.objects.filter(pinned=True).exists()
    assert set(Memory.objects.values_list("tier", flat=True)) == {t for t, _ in Memory.TIERS}
    queued_with_diff = Memory.objects.filter(status=Memory.QUEUED, supersedes__isnull=False)
    assert queued_with_diff.exists()
    call_command("seed_demo", verbosity=0)
    assert (Memory.objects.count(), AuditEvent.objects.count()) == (count, events)
