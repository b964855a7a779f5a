import pytest

from knowledge.models import Webhook
from tests.browser.conftest import login, nav

pytestmark = pytest.mark.browser


def test_admin_registers_and_removes_a_webhook(page, world):
    login(page, "adam")
    nav(page, "Webhooks")
    assert page.locator("h1").inner_text() == "Webhooks"
    page.fill("input[name=url]", "https://93.184.215.14/brain")
    page.check("input[value='memory.written']")
    page.check("input[value='memory.stale']")
    page.fill("input[name=secret]", "a-long-shared-secret-123")
    page.click("button:has-text('Register')")
    row = page.locator("tr:has-text('https://93.184.215.14/brain')")
    row.wait_for()
    assert "memory.stale, memory.written" in row.inner_text()
    assert "a-long-shared-secret-123" not in page.content()
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button:has-text('Remove')").click()
    page.locator("text=No webhooks yet.").wait_for()
    assert not Webhook.objects.exists()
