import pytest

from knowledge.models import Memory
from memory.models import ConsolidationPlan
from tests.browser.conftest import login, nav
from tests.memory.consolidation.test_consolidation import full_state, ten_copies

pytestmark = pytest.mark.browser


def test_reviewer_runs_applies_and_reverts_a_plan_in_place(page, world):
    copies = ten_copies(world.copilot)
    before = full_state([c.pk for c in copies])
    login(page, "rita")
    nav(page, "Consolidation")
    page.click("text=Run consolidation now")
    page.wait_for_url("**/models/jobs/*")  # the run's progress, polled until done
    page.click("text=See the result")
    page.wait_for_url("**/consolidation/*/")
    assert page.locator("#plan-state").inner_text() == "proposed"
    assert page.locator(".group").count() == 1
    page.on("dialog", lambda dialog: dialog.accept())
    url = page.url
    page.click("#plan-actions >> text=Apply")
    page.locator("#plan-state", has_text="applied").wait_for()
    assert page.url == url  # htmx swapped the plan in place
    assert set(Memory.objects.filter(status="active").values_list("id", flat=True)) == {copies[-1].pk}
    page.click("#plan-actions >> text=Revert")
    page.locator("#plan-state", has_text="reverted").wait_for()
    assert ConsolidationPlan.objects.get().state == "reverted"
    assert full_state([c.pk for c in copies]) == before
