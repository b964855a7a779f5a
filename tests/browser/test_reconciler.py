import pytest

from tests.browser.conftest import login
from tests.memory.consolidation.test_consolidation import remember

pytestmark = pytest.mark.browser


def test_reconcile_now_on_the_agent_page_with_htmx(page, world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "propose"
    remember(world.copilot, "Alice prefers e-mail over phone calls.")
    login(page, "rita")
    page.goto(f"/agents/{world.copilot.name}/")
    panel = page.locator("#reconciler-panel")
    panel.locator("text=has not run for this agent yet").wait_for()  # loaded by htmx
    panel.locator("button:has-text('Reconcile now')").click()
    # Queued, then polled until the pass is done (the live server's worker is inline).
    page.locator("#reconciler-panel >> text=Reconciled copilot: plan #").wait_for()
    page.locator("#reconciler-panel a:has-text('See the result')").click()
    page.wait_for_url("**/consolidation/*/")
    assert "system:reconciler" in page.locator("main").inner_text()
