from django.db import transaction

from knowledge.memories.rows import memory_row_create, memory_row_revise
from knowledge.models import Memory


def test_create_then_revise_keeps_every_version(world):
    with transaction.atomic():
        memory = memory_row_create(
            owner=world.copilot,
            store="shared",
            text="VPN-4012 is fixed by client 5.2.1",
            author_kind="agent",
            author_name="copilot",
            sources=[{"kind": "kb", "ref": "KB-7"}, {"kind": "kb", "ref": "KB-7"}],
        )
    assert memory.version == 1
    assert memory.sources.count() == 1
    first_hash = memory.content_hash
    with transaction.atomic():
        memory = Memory.objects.select_for_update().get(pk=memory.pk)
        memory_row_revise(
            memory=memory,
            text="VPN-4012 is fixed by client 5.2.2",
            author_kind="person",
            author_name="rita",
            reason="typo in version",
        )
    memory.refresh_from_db()
    assert memory.version == 2
    assert memory.content_hash != first_hash
    assert [v.text for v in memory.versions.order_by("version")] == [
        "VPN-4012 is fixed by client 5.2.1",
        "VPN-4012 is fixed by client 5.2.2",
    ]
    assert memory.versions.get(version=2).reason == "typo in version"
