"""The review queue by keyboard alone: a skip link to the first memory, a/j/k, focus moving on
after each decision, the shortcut list, and a bulk selection that survives a refused action."""

import pytest
from playwright.sync_api import expect

from knowledge.models import Memory
from tests import factory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser


def _queued(world, n):
    return [
        factory.make_queued_memory(world.copilot, f"Queued fact number {i} about the billing service.")
        for i in range(n)
    ]


def _wait_focus(page, element_id):
    # expect() polls from Python; a string predicate (wait_for_function) is evaluated with eval
    # in the page once the first check fails, which the page's CSP refuses.
    expect(page.locator(f"#{element_id}")).to_be_focused()


def test_a_reviewer_approves_three_memories_with_the_keyboard_only(page, world):
    memories = _queued(world, 4)
    login(page, "rita")
    page.goto("/review/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to the first memory"
    page.keyboard.press("Enter")
    _wait_focus(page, f"memory-{memories[0].pk}")

    page.keyboard.press("a")
    page.locator(f"#memory-{memories[0].pk}.result").wait_for()
    _wait_focus(page, f"memory-{memories[1].pk}")  # focus moved on to the next memory

    page.keyboard.press("a")
    page.locator(f"#memory-{memories[1].pk}.result").wait_for()
    _wait_focus(page, f"memory-{memories[2].pk}")

    page.keyboard.press("j")
    _wait_focus(page, f"memory-{memories[3].pk}")
    page.keyboard.press("k")
    _wait_focus(page, f"memory-{memories[2].pk}")
    page.keyboard.press("a")
    page.locator(f"#memory-{memories[2].pk}.result").wait_for()
    _wait_focus(page, f"memory-{memories[3].pk}")

    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[m.pk] for m in memories] == ["active", "active", "active", "queued"]
    expect(page.locator("#queue-count")).to_have_text("1")


def test_reject_by_keyboard_asks_for_the_reason_then_moves_on(page, world):
    first, second = _queued(world, 2)
    login(page, "rita")
    page.goto("/review/")
    page.locator(f"#memory-{first.pk}").focus()
    page.keyboard.press("r")
    assert page.evaluate("document.activeElement.name") == "reason"
    page.keyboard.type("not a fact")
    page.keyboard.press("Enter")
    page.locator(f"#memory-{first.pk}.result").wait_for()
    _wait_focus(page, f"memory-{second.pk}")
    first.refresh_from_db()
    assert first.status == "rejected"


def test_question_mark_lists_the_shortcuts(page, world):
    _queued(world, 1)
    login(page, "rita")
    page.goto("/review/")
    assert not page.locator("#queue-keys").is_visible()
    page.keyboard.press("?")
    assert page.locator("#queue-keys").is_visible()
    assert "approve the memory in focus" in page.locator("#queue-keys").inner_text()
    page.keyboard.press("Escape")
    assert not page.locator("#queue-keys").is_visible()


def test_the_selection_is_kept_after_a_refused_bulk_action(page, world):
    first, second, third = _queued(world, 3)
    login(page, "rita")
    page.goto("/review/")
    page.locator(f"#memory-{first.pk}").focus()
    page.keyboard.press("x")
    page.check(f"#memory-{third.pk} input[name=ids]")
    page.click("button:has-text('Reject selected')")  # no reason given: refused
    page.locator("#queue-notice.error").wait_for()
    assert page.is_checked(f"#memory-{first.pk} input[name=ids]")
    assert not page.is_checked(f"#memory-{second.pk} input[name=ids]")
    assert page.is_checked(f"#memory-{third.pk} input[name=ids]")
    assert set(Memory.objects.values_list("status", flat=True)) == {"queued"}
