"""The curation guides without picking an owner first: the Entries tab links to every agent's
guide, a guide opens as a page, an admin edits it in place (htmx), and neither page scrolls
sideways on a phone or a laptop."""

import pytest

from knowledge.models import CurationGuide
from tests.browser.conftest import login

pytestmark = pytest.mark.browser

WIDTH = "[document.documentElement.scrollWidth, window.innerWidth]"


@pytest.mark.parametrize("size", [(390, 844), (1280, 900)])
def test_an_admin_opens_and_edits_a_guide_without_picking_an_owner(page, world, size):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    login(page, "adam")
    page.goto("/knowledge/entries/")
    page.click("#guide a:has-text('open the curation guides')")
    page.wait_for_url("**/knowledge/guide/")
    scroll, inner = page.evaluate(WIDTH)
    assert scroll <= inner
    page.click("a[data-agent='scribe']")
    page.wait_for_url("**/knowledge/guide/scribe")
    page.locator("h2:has-text('Curation guide of scribe')").wait_for()
    scroll, inner = page.evaluate(WIDTH)
    assert scroll <= inner
    page.click("summary:has-text('Edit the curation guide')")
    page.fill("#guide textarea[name=taxonomy]", "vendors → contracts")
    page.click("#guide button:has-text('Save guide')")
    page.locator("#guide >> text=Curation guide saved (version 1).").wait_for()
    assert page.url.endswith("/knowledge/guide/scribe")  # saved in place, no reload
    assert CurationGuide.objects.get(owner=world.scribe).taxonomy == "vendors → contracts"
