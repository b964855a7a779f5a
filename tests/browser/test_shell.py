import pytest

from tests.browser.conftest import login, nav

pytestmark = pytest.mark.browser


def test_login_navigation_and_logout(page, world):
    page.goto("/")
    assert "/login/" in page.url
    login(page, "adam")
    assert page.locator(".username").inner_text() == "adam"
    nav(page, "Agent library")
    assert page.locator("h1").inner_text() == "Agent library"
    assert page.locator("table >> text=copilot").is_visible()
    nav(page, "Settings")
    assert page.locator("h1").inner_text() == "Settings"
    page.click("text=Log out")
    page.wait_for_url("**/login/")


def test_wrong_password_is_refused(page, world):
    page.goto("/login/")
    page.fill("input[name=username]", "adam")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    page.locator(".error").wait_for()


def test_reviewer_sees_no_admin_navigation_and_gets_403(page, world):
    login(page, "rita")
    assert page.locator("nav >> text=Settings").count() == 0
    response = page.goto("/settings/")
    assert response.status == 403
    assert "Not allowed" in page.locator("h1").inner_text()
    page.goto(f"/agents/{world.copilot.name}/")
    assert page.locator("text=New token").count() == 0


def test_admin_makes_a_token_with_htmx_and_revokes_it(page, world):
    login(page, "adam")
    page.goto(f"/agents/{world.copilot.name}/")
    page.fill("input[name=label]", "from-browser")
    page.click("button:has-text('New token')")
    token = page.locator("#new-token").inner_text()
    assert token.startswith("brn_")
    assert page.locator("text=from-browser").is_visible()
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("tr:has-text('from-browser') button:has-text('Revoke')").click()
    page.locator("tr:has-text('from-browser') >> text=revoked").wait_for()


def test_reviewer_reaches_the_status_tab_from_the_knowledge_page(page, world):
    from tests import factory

    factory.make_entry(world.copilot, name="Pricing 2025", blocks=["Seats cost 12 EUR"])
    login(page, "rita")
    page.goto("/knowledge/entries/")
    page.click(".tabs >> text=Status")
    page.wait_for_url("**/knowledge/status/")
    alerts = page.locator("#alerts .msg")
    assert "worker has never reported" in alerts.first.inner_text()  # no worker runs in tests
    assert page.locator("#coverage tbody tr").count() == 3
    page.click("#lints >> text=Pricing 2025")
    page.wait_for_url("**/knowledge/entries/*/")


def test_a_chosen_dark_theme_overrides_the_system_and_is_kept_for_the_user(page, world):
    """Issue 53: the header's theme choice, kept per user (another sign-in shows it too)."""
    dark = "rgb(17, 20, 28)"  # --bg of the dark colours
    background = "getComputedStyle(document.body).backgroundColor"
    page.emulate_media(color_scheme="light")
    login(page, "rita")
    before = page.evaluate(background)
    assert before != dark
    page.locator(".who select[name=theme]").select_option("dark")
    page.locator("html[data-theme=dark]").wait_for(state="attached")
    assert page.evaluate(background) == dark
    page.click("text=Log out")
    page.wait_for_url("**/login/")
    login(page, "rita")
    assert page.evaluate(background) == dark  # kept for rita, whatever the system says
    page.locator(".who select[name=theme]").select_option("auto")
    page.locator("html:not([data-theme])").wait_for(state="attached")
    assert page.evaluate(background) == before
    page.emulate_media(color_scheme="dark")
    assert page.evaluate(background) == dark  # auto follows the system again
