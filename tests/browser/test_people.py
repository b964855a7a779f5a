import pytest
from rest_framework.test import APIClient

from tests.browser.conftest import login, nav

pytestmark = pytest.mark.browser


def test_an_admin_adds_a_reviewer_and_an_integration_token_that_works_on_the_api(
    page, world, browser, live_server
):
    login(page, "adam")
    nav(page, "People")
    page.wait_for_url("**/people/")
    form = page.locator("#person-create")
    form.locator("input[name=username]").fill("vera")
    form.locator("select[name=role]").select_option("reviewer")
    form.locator("input[name=password]").fill("long-enough-1")
    form.locator("button:has-text('Add')").click()
    page.locator(".msg:has-text('vera can now log in as reviewer')").wait_for()
    assert page.locator("#people tr[data-user=vera]").inner_text().count("reviewer") >= 1

    page.click("nav.tabs >> text=API tokens")
    page.wait_for_url("**/people/tokens/")
    form = page.locator("#token-create")
    form.locator("select[name=kind]").select_option("integration")
    form.locator("input[name=integration]").fill("helpdesk")
    form.locator("input[name=label]").fill("from the console")
    form.locator("button:has-text('Make token')").click()
    raw = page.locator("#new-token").inner_text()
    assert raw.startswith("brn_")
    assert page.locator("#tokens tr:has-text('integration helpdesk')").is_visible()

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    me = api.get("/api/me")
    assert me.status_code == 200 and me.json() == {"kind": "integration", "name": "helpdesk", "role": None}

    # The new reviewer logs in, sees no People page, and changes her password.
    other = browser.new_context(base_url=live_server.url).new_page()
    login(other, "vera", password="long-enough-1")
    assert other.locator("nav.mainnav a:has-text('People')").count() == 0
    other.click("header .username")
    other.fill("input[name=old_password]", "long-enough-1")
    other.fill("input[name=new_password1]", "another-secret-7")
    other.fill("input[name=new_password2]", "another-secret-7")
    other.click("button:has-text('Change password')")
    other.locator(".msg:has-text('Your password is changed')").wait_for()
    other.context.close()
