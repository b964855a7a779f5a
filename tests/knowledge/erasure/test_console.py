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

    asked = admin.get("/knowledge/erasures/", {"person": "alice"})
    assert asked.status_code == 302 and asked["Location"] == "/knowledge/erasures/person/alice"
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


def test_erase_is_offered_on_an_entry_a_material_and_a_message_and_a_message_leads_to_its_speaker(world):
    from knowledge.materials import services as materials

    entry = factory.make_entry(world.copilot, name=f"Runbook {TOKEN}", blocks=["step one"])
    material = materials.material_paste(
        actor=factory.SYSTEM, owner=world.copilot, store="shared", title="Manual", text=f"Open {TOKEN}."
    )
    [said] = factory.post_messages(world.dm_alice, [{"speaker": "alice", "text": f"My pin is {TOKEN}"}])
    admin, reviewer = _console(world.admin), _console(world.reviewer)
    pages = {
        f"/knowledge/entries/{entry.pk}/": f"/knowledge/erasures/entry/{entry.pk}",
        f"/knowledge/materials/{material.pk}/": f"/knowledge/erasures/material/{material.pk}",
        f"/recall/browse/message/{said}": f"/knowledge/erasures/message/{said}",
    }
    for page, link in pages.items():
        assert f'href="{link}"' in admin.get(page).content.decode(), page
        assert f'href="{link}"' not in reviewer.get(page).content.decode(), page

    preview = admin.get(f"/knowledge/erasures/message/{said}").content.decode()
    assert "1 message" in preview and 'href="/knowledge/erasures/person/alice"' in preview
    for link in pages.values():
        done = admin.post(link, {"reason": "secret", "confirm": "ERASE"})
        assert done.status_code == 302, (link, done.content.decode())
    assert database_rows_holding(TOKEN) == []
    assert admin.get("/knowledge/erasures/nothing/1").status_code == 404


def test_forgetting_a_channel_needs_its_name_typed(world):
    factory.post_messages(world.support, [{"speaker": "bob", "text": f"key {TOKEN}"}])
    admin = _console(world.admin)

    assert (
        admin.post("/knowledge/erasures/channel/support", {"reason": "x", "confirm": "ERASE"}).status_code
        == 400
    )
    assert database_rows_holding(TOKEN)
    assert (
        admin.post("/knowledge/erasures/channel/support", {"reason": "x", "confirm": "support"}).status_code
        == 302
    )
    assert database_rows_holding(TOKEN) == []


def test_erasing_an_agents_store_from_the_console(world):
    factory.make_memory(world.copilot, f"note {TOKEN}", store="private:alice")
    admin = _console(world.admin)

    preview = admin.get("/knowledge/erasures/store/copilot/private:alice")

    assert preview.status_code == 200 and "store private:alice of copilot" in preview.content.decode()
    done = admin.post("/knowledge/erasures/store/copilot/private:alice", {"reason": "x", "confirm": "ERASE"})
    assert done.status_code == 302
    assert database_rows_holding(TOKEN) == []
