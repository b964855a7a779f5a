from django.db import transaction

from knowledge.memories.activation import memory_row_create
from knowledge.memories.rows import memory_row_revise
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


def test_a_revision_that_changes_nothing_is_refused_and_writes_nothing(world):
    """memory_text_revise is the one revision of a text (memory_revise, lesson_edit,
    block_correct): the same text, and the same sources when they are given, is refused."""
    import pytest

    from knowledge.errors import Invalid
    from knowledge.memories.rows import memory_text_revise
    from knowledge.principal import Principal

    memory = memory_row_create(
        owner=world.copilot,
        store="shared",
        text="The printer is on floor 3",
        author_kind="agent",
        author_name="copilot",
        sources=[{"kind": "kb", "ref": "KB-1"}],
    )
    rita = Principal(kind="person", name="rita", role="reviewer")
    with transaction.atomic(), pytest.raises(Invalid) as refused:
        memory_text_revise(actor=rita, memory=memory, text=memory.text, reason="no change")
    assert "Nothing changed" in str(refused.value)
    same_sources = [{"kind": "kb", "ref": "KB-1"}]
    with transaction.atomic(), pytest.raises(Invalid):
        memory_text_revise(actor=rita, memory=memory, text=memory.text, reason="same", sources=same_sources)
    memory.refresh_from_db()
    assert (memory.version, memory.versions.count()) == (1, 1)
    with transaction.atomic():
        memory = Memory.objects.prefetch_related("sources").get(pk=memory.pk)
        from_version = memory_text_revise(
            actor=rita,
            memory=memory,
            text=memory.text,
            reason="new source",
            sources=[{"kind": "kb", "ref": "KB-2"}],
        )
    memory.refresh_from_db()
    assert (from_version, memory.version, memory.author_name) == (1, 2, "rita")
    assert [s.ref for s in memory.sources.all()] == ["KB-2"]
