"""The console's shell at a phone's and a laptop's size: no page scrolls sideways, the menu folds
on a phone, the navigation is one row on a laptop."""

import pytest
from django.core.management import call_command

from tests import factory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser

SIZES = {"phone": (390, 844), "laptop": (1280, 900)}
WIDTH = "[document.documentElement.scrollWidth, window.innerWidth]"


def _pages(page):
    """Every page reachable from the main navigation and the Knowledge tabs, plus one detail page
    of each kind the demo workspace has (an entry, a memory, an agent, a material)."""
    page.goto("/knowledge/entries/")
    hrefs = page.eval_on_selector_all(
        "nav.mainnav a[href], nav.tabs a[href]", "links => links.map(a => a.getAttribute('href'))"
    )
    for selector in ("table a[href*='/knowledge/entries/']", ""):
        if selector:
            hrefs += page.eval_on_selector_all(
                selector, "ls => ls.slice(0, 1).map(a => a.getAttribute('href'))"
            )
    page.goto("/memories/")
    hrefs += page.eval_on_selector_all(
        "a[href^='/memories/'][href$='/']", "ls => ls.slice(-1).map(a => a.getAttribute('href'))"
    )
    hrefs += [
        "/agents/copilot/",
        "/agents/copilot/skills/",
        "/recall/?agent=copilot&channel=general&q=printer",
        "/search/?q=printer",
        "/people/tokens/",
        "/account/",
    ]
    return list(dict.fromkeys(h for h in hrefs if not h.startswith("/api/docs")))


@pytest.mark.parametrize("size", SIZES)
def test_no_page_scrolls_sideways(page, live_server, size):
    call_command("seed_demo", verbosity=0)
    factory.make_user("adam", role="admin")
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    login(page, "adam")
    pages = _pages(page)
    assert len(pages) >= 15, pages
    wide = {}
    for href in pages:
        response = page.goto(href)
        assert response.status == 200, href
        scroll, inner = page.evaluate(WIDTH)
        if scroll > inner:
            wide[href] = scroll
    assert wide == {}, f"wider than {SIZES[size][0]} px"


def test_the_menu_folds_on_a_phone_and_is_one_row_on_a_laptop(page, live_server):
    factory.make_user("adam", role="admin")
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "adam")
    assert not page.locator("nav.mainnav").is_visible()
    header = page.locator("header.topbar").bounding_box()
    assert header["height"] < 80  # the folded header leaves the screen to the page
    page.click(".menu-button")
    page.click("summary:has-text('Agents')")
    page.click("nav.mainnav >> text=Agent library")
    page.wait_for_url("**/agents/")
    page.set_viewport_size({"width": 1024, "height": 800})
    page.goto("/")
    tops = page.eval_on_selector_all(
        "nav.mainnav summary, .owner select, .who .username",
        "els => els.map(e => e.getBoundingClientRect().top)",
    )
    assert max(tops) - min(tops) < 20, tops  # one row
    assert page.locator("link[rel=icon]").get_attribute("href").endswith("favicon.svg")
    assert page.request.get("/static/favicon.svg").ok
