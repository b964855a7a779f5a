"""The console's erase pages: a preview of exactly what goes, a typed confirmation, admins only,
CSRF on."""

from django.test import Client

from knowledge.models import Erasure, Memory
from tests import factory
from tests.knowledge.erasure.sweep import database_rows_holding
from tests.knowledge.erasure.test_erasure import TOKEN, _person_world


def _console(user, **kwargs):
    client = Client(**kwargs)
    client.force_login(user)
    return client


def test_forget_this_person_previews_then_needs_the_name_typed(world):
    _person_world(world)
    admin = _console(world.admin)

    preview = admin.get("/knowledge/erasures/person/alice")

    assert preview.status_code == 200
    page = preview.content.decode()
    assert "Forget alice" in page and "3 messages" in page and "1 episode" in page
    wrong = admin.post("/knowledge/erasures/person/alice", {"reason": "asked", "confirm": "ALICE"})
    assert wrong.status_code == 400 and "Type alice exactly" in wrong.content.decode()
    assert database_rows_holding(TOKEN) and not Erasure.objects.exists()

    done = admin.post("/knowledge/erasures/person/alice", {"reason": "asked", "confirm": "alice"})

    assert done.status_code == 302 and done["Location"] == "/knowledge/erasures/"
    assert database_rows_holding(TOKEN) == []
    ledger = admin.get("/knowledge/erasures/").content.decode()
    assert "person alice" in ledger and "asked" in ledger


def test_erase_on_a_memory_page_needs_the_word_erase(world):
    memory = factory.make_memory(world.copilot, f"The door code is {TOKEN}", store="shared")
    admin = _console(world.admin)
    assert 'id="erase-memory"' in admin.get(f"/memories/{memory.pk}/").content.decode()

    admin.post(f"/knowledge/erasures/memory/{memory.pk}", {"reason": "secret", "confirm": "erase"})
    assert Memory.objects.get(pk=memory.pk).status == "active"
    admin.post(f"/knowledge/erasures/memory/{memory.pk}", {"reason": "secret", "confirm": "ERASE"})

    assert Memory.objects.get(pk=memory.pk).status == "erased"
    assert 'id="erase-memory"' not in admin.get(f"/memories/{memory.pk}/").content.decode()


def test_only_admins_reach_the_erase_pages_and_csrf_is_checked(world):
    memory = factory.make_memory(world.copilot, f"kept {TOKEN}", store="shared")
    reviewer = _console(world.reviewer)
    assert reviewer.get(f"/knowledge/erasures/memory/{memory.pk}").status_code == 403
    assert 'id="erase-memory"' not in reviewer.get(f"/memories/{memory.pk}/").content.decode()
    assert (
        reviewer.post(
            f"/knowledge/erasures/memory/{memory.pk}", {"reason": "x", "confirm": "ERASE"}
        ).status_code
        == 403
    )

    strict = _console(world.admin, enforce_csrf_checks=True)
    refused = strict.post(f"/knowledge/erasures/memory/{memory.pk}", {"reason": "x", "confirm": "ERASE"})

    assert refused.status_code == 403
    assert Memory.objects.get(pk=memory.pk).status == "active"
    assert _console(world.admin).get("/knowledge/erasures/person/nobody").status_code == 404
