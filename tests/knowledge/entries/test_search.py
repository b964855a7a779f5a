"""Entry search is kept current by the database, whoever writes the blocks."""

import datetime

from django.db import transaction
from django.utils import timezone

from knowledge.entries.selectors import EntryFilters, entry_search
from knowledge.memories.activation import memory_row_create
from knowledge.models import Entry, Memory
from knowledge.principal import Principal
from tests.factory import make_entry, set_state

ADMIN = Principal(kind="person", name="adam", role="admin")


def _found(q, **filters):
    return [e.name for e in entry_search(ADMIN, EntryFilters(q=q, **filters)).entries]


def test_any_writer_of_blocks_keeps_search_counts_and_authors_current(world):
    entry = make_entry(world.copilot, name="Printer", blocks=["Toner in the cupboard."])
    block = entry.created_blocks[0]
    assert _found("cupboard") == ["Printer"]
    Memory.objects.filter(pk=block.pk).update(text="Toner in the basement.", author_name="dreaming")
    assert _found("cupboard") == [] and _found("basement") == ["Printer"]
    assert Entry.objects.get(pk=entry.pk).block_authors == ["dreaming"]
    set_state([block.pk], status=Memory.REJECTED)
    assert _found("basement") == []
    assert Entry.objects.get(pk=entry.pk).block_count == 0
    with transaction.atomic():
        memory_row_create(
            owner=world.copilot,
            store="shared",
            text="Paper jams on tray two.",
            author_kind="agent",
            author_name="copilot",
            status=Memory.QUEUED,
            entry=entry,
            position=1,
        )
    assert _found("tray") == ["Printer"]
    assert Entry.objects.get(pk=entry.pk).block_count == 1


def test_equal_matches_come_most_recently_changed_first(world):
    old = make_entry(world.copilot, name="Old note", blocks=["Mentions the firewall."])
    new = make_entry(world.copilot, name="New note", blocks=["Mentions the firewall too."])
    Entry.objects.filter(pk=old.pk).update(updated_at=timezone.now() - datetime.timedelta(days=3))
    Entry.objects.filter(pk=new.pk).update(updated_at=timezone.now() - datetime.timedelta(days=1))
    assert _found("firewall") == ["New note", "Old note"]


def test_a_query_word_that_matches_no_name_word_does_not_match_by_name(world):
    make_entry(world.copilot, name="Kubernetes cluster")
    make_entry(world.copilot, name="Cluster headache")
    assert _found("kubernetes clustr") == ["Kubernetes cluster"]  # misspelt, both words present
    assert _found("zebra cluster") == []  # one word in common is not a name match


def test_deleted_entries_are_found_only_when_asked_for(world):
    entry = make_entry(world.copilot, name="Fax machine")
    from knowledge.entries.services import entry_delete

    entry_delete(actor=ADMIN, entry_id=entry.pk)
    assert _found("fax") == []
    assert _found("fax", deleted=True) == ["Fax machine"]
