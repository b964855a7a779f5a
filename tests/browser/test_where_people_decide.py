"""The reviewer's story of issue 59.3, in a real browser: Noor's, Noor's sister's and Sam's trains
give no hint across people; a replace touches only what the card lists; a hint is dismissed as
unrelated from the keyboard; and one restore undoes a whole decision."""

import pytest
from playwright.sync_api import expect

from knowledge.models import AuditEvent, Channel, Memory
from tests import factory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser


def _dm(world, name):
    person = factory.make_person(name)
    channel = factory.make_channel(f"dm-{name}", kind=Channel.KIND_DM, person=person, agent=world.copilot)
    factory.make_conversation(world.copilot, channel)


def test_the_reviewers_story_of_three_trains(page, world):
    _dm(world, "noor")
    _dm(world, "sam")
    copilot = world.copilot
    sams = factory.make_memory(copilot, "Sam's train leaves at 08:15.", store="private:sam")
    noors_old = factory.make_memory(copilot, "Noor's train leaves at 08:15.", store="private:noor")
    noors = factory.make_queued_memory(copilot, "Noor's train leaves at 08:45.", store="private:noor")
    sister = factory.make_queued_memory(
        copilot, "Noor's sister's train leaves at 10:45.", store="private:noor"
    )
    frozen = factory.make_memory(world.scribe, "Deploys are not allowed on Fridays.", store="shared")
    allowed = factory.make_queued_memory(copilot, "Deploys are allowed on Fridays.", store="shared")

    login(page, "adam")  # an admin: reviews, and restores from the Audit tab
    page.goto("/review/")
    noor_card, sister_card = page.locator(f"#memory-{noors.pk}"), page.locator(f"#memory-{sister.pk}")
    # No hint across people: Noor's card names only Noor's own older train, with its store and
    # person; Sam's train and Noor's sister's train are nowhere on it, and the sister's card is bare.
    expect(noor_card.locator(".conflicts li")).to_have_count(1)
    expect(noor_card.locator(f'.conflicts li[data-memory="{noors_old.pk}"]')).to_contain_text(
        "private:noor, person noor"
    )
    for card, other in ((noor_card, sams), (noor_card, sister), (sister_card, noors), (sister_card, sams)):
        expect(card.locator(f'li[data-memory="{other.pk}"]')).to_have_count(0)
    expect(sister_card.locator(".conflicts, .duplicates")).to_have_count(0)

    # A replace touches only what the card lists: 1 asks, Enter approves.
    noor_card.focus()
    page.keyboard.press("1")
    expect(noor_card.locator(".confirm-hint")).to_contain_text(f"retire #{noors_old.pk}")
    assert Memory.objects.get(pk=noors_old.pk).status == "active"  # asked, not done
    page.keyboard.press("Enter")
    page.locator(f"#memory-{noors.pk}.result").wait_for()
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert (statuses[noors.pk], statuses[noors_old.pk]) == ("active", "superseded")
    assert (statuses[sams.pk], statuses[sister.pk]) == ("active", "queued")

    # Dismiss as unrelated from the keyboard: u on the card; the card comes back without the
    # hint and stays in focus, and approving it then needs no conflict decision.
    deploy_card = page.locator(f"#memory-{allowed.pk}")
    expect(deploy_card.locator(f'li[data-memory="{frozen.pk}"]')).to_have_count(1)
    deploy_card.focus()
    page.keyboard.press("u")
    expect(page.locator(f"#memory-{allowed.pk}")).to_contain_text("dismissed as unrelated")
    expect(page.locator(f'#memory-{allowed.pk} li[data-memory="{frozen.pk}"]')).to_have_count(0)
    expect(page.locator(f"#memory-{allowed.pk}")).to_be_focused()
    page.keyboard.press("a")
    page.locator(f"#memory-{allowed.pk}.result").wait_for()
    assert Memory.objects.get(pk=allowed.pk).status == Memory.objects.get(pk=frozen.pk).status == "active"

    # One restore undoes the whole replace: the approval and the supersession are one batch.
    approved = AuditEvent.objects.get(action="memory.approved", object_ids__contains=[str(noors.pk)])
    page.goto(f"/knowledge/audit/?batch={approved.batch_id}")
    page.click("text=Preview restoring the whole batch")
    page.locator("text=Nothing has changed yet").wait_for()
    page.click("button:has-text('Restore 2 records')")
    page.locator("text=Restored 2 records").wait_for()
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert (statuses[noors.pk], statuses[noors_old.pk], statuses[sams.pk]) == ("queued", "active", "active")


def test_a_bulk_approval_names_what_it_would_put_in_force_and_enter_leaves_those_queued(page, world):
    allowed = factory.make_queued_memory(world.copilot, "Deploys are allowed on Fridays.", store="shared")
    forbidden = factory.make_queued_memory(
        world.copilot, "Deploys are not allowed on Fridays.", store="shared"
    )
    plain = factory.make_queued_memory(world.copilot, "Invoices go out on the 1st.", store="shared")
    factory.embed_all()
    login(page, "rita")
    page.goto("/review/?store=shared")
    page.keyboard.press("A")
    flags = page.locator("#confirm-flags")
    expect(flags).to_contain_text("2 of them would put 1 duplicate or contradiction in force")
    expect(flags.locator(".flag")).to_contain_text("contradiction")
    expect(page.locator("#confirm-matching")).to_be_focused()
    expect(page.locator("#confirm-matching")).to_have_text("Approve the other 1, leave these 2 queued")
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_contain_text("Left queued as you asked", timeout=15_000)
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert (statuses[plain.pk], statuses[allowed.pk], statuses[forbidden.pk]) == (
        "active",
        "queued",
        "queued",
    )


def test_a_key_pressed_on_a_card_htmx_has_just_swapped_in_still_decides_in_place(page, world):
    """htmx gives a swapped-in card focus at once (same id) but binds its forms only when the swap
    settles, 20 ms later. A reviewer's "a" in between submitted the plain form, and the browser
    left the queue for the card's POST URL (405). Here "a" is pressed inside that gap, from htmx's
    own afterSwap event: the approval still goes through htmx and the queue stays."""
    frozen = factory.make_memory(world.scribe, "Deploys are not allowed on Fridays.", store="shared")
    allowed = factory.make_queued_memory(world.copilot, "Deploys are allowed on Fridays.", store="shared")
    login(page, "adam")
    page.goto("/review/")
    card = page.locator(f"#memory-{allowed.pk}")
    expect(card.locator(f'li[data-memory="{frozen.pk}"]')).to_have_count(1)
    page.evaluate(
        """(id) => document.body.addEventListener("htmx:afterSwap", () => {
            const card = document.getElementById(id);
            card.dispatchEvent(new KeyboardEvent("keydown", { key: "a", bubbles: true }));
        }, { once: true })""",
        f"memory-{allowed.pk}",
    )
    card.focus()
    page.keyboard.press("u")
    page.locator(f"#memory-{allowed.pk}.result").wait_for()
    assert page.url.endswith("/review/")
    assert Memory.objects.get(pk=allowed.pk).status == "active"
