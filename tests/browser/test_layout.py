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


# Whether any word of an element's text is split over two lines: a Range over each word gives
# one box per line it is drawn on.
BROKEN_WORDS = """els => els.flatMap(el => {
  const broken = [];
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      if (range.getClientRects().length > 1) broken.push(match[0]);
    }
  }
  return broken;
})"""


def test_queue_tabs_at_laptop_width_and_recall_headers_on_a_phone_keep_their_words(page, live_server):
    """Issue 53: the queue's "All" tab beside the filters at 1280 px ("Al / l"), the filtered
    queue on a phone, and the Recall table's headers at 390 px ("KNOWLED / GE")."""
    call_command("seed_demo", verbosity=0)
    factory.make_user("adam", role="admin")
    login(page, "adam")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/review/?agent=copilot")
    tabs = page.locator("#queue-tabs a")
    assert tabs.count() > 1
    assert page.eval_on_selector_all("#queue-tabs a", BROKEN_WORDS) == []
    all_tab = page.locator("#queue-tabs a", has_text="All").bounding_box()
    other = tabs.nth(1).bounding_box()
    assert abs(all_tab["height"] - other["height"]) < 2  # one line, like its neighbours

    # The check sees a word split over two lines when there is one.
    page.evaluate(
        """() => { const p = document.createElement("p"); p.id = "squeezed"; p.textContent = "KNOWLEDGE";
        p.style.width = "3ch"; p.style.overflowWrap = "anywhere"; document.body.append(p); }"""
    )
    assert page.eval_on_selector_all("#squeezed", BROKEN_WORDS) == ["KNOWLEDGE"]

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/review/?agent=copilot")
    scroll, inner = page.evaluate(WIDTH)
    assert scroll <= inner  # the filters and tabs of the queue fit a phone
    page.goto("/recall/?agent=copilot&channel=general&q=printer")
    headers = page.locator("#recall-results th")
    assert headers.count() > 5
    assert page.eval_on_selector_all("#recall-results th", BROKEN_WORDS) == []
