import io

from django.core.management import call_command

from knowledge.models import AuditEvent, CurationGuide, Entry, EntryRelation, Memory


def test_seed_demo_adds_entries_once(db):
    call_command("seed_demo", stdout=io.StringIO())
    counts = (
        Entry.all_objects.count(),
        EntryRelation.objects.count(),
        Memory.objects.count(),
        AuditEvent.objects.count(),
    )
    assert Entry.objects.count() >= 25 and len(set(Entry.objects.values_list("type", flat=True))) >= 5
    assert EntryRelation.objects.count() >= 10
    corrected = Memory.objects.filter(entry__name="VPN client", version=2)
    assert corrected.count() == 2 and all(v.reason for m in corrected for v in m.versions.filter(version=2))
    assert Entry.all_objects.filter(deleted_at__isnull=False).count() == 1
    assert CurationGuide.objects.filter(owner__name="copilot").exists()
    call_command("seed_demo", stdout=io.StringIO())
    assert counts == (
        Entry.all_objects.count(),
        EntryRelation.objects.count(),
        Memory.objects.count(),
        AuditEvent.objects.count(),
    )
