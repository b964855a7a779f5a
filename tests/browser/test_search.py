import pytest

from knowledge.materials import services as materials
from tests import factory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1280, 390])
def test_the_header_search_finds_a_memory_an_entry_and_a_material_by_one_word(page, world, width):
    memory = factory.make_memory(world.copilot, "The Marrakesh office printer needs a badge.", store="shared")
    entry = factory.make_entry(world.copilot, name="Marrakesh office", blocks=["Opened in 2024."])
    material = materials.material_upload(
        actor=factory.SYSTEM,
        owner=world.copilot,
        store="shared",
        filename="marrakesh.txt",
        data=b"Floor plan.",
    )
    page.set_viewport_size({"width": width, "height": 900})
    login(page, "rita")
    page.fill("header input[name=q]", "marrakesh")
    page.press("header input[name=q]", "Enter")
    page.wait_for_url("**/search/?q=marrakesh")
    assert page.locator(f"#search-memories a[href='/memories/{memory.pk}/']").is_visible()
    assert page.locator(f"#search-entries a[href='/knowledge/entries/{entry.pk}/']").is_visible()
    assert page.locator(f"#search-materials a[href='/knowledge/materials/{material.pk}/']").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    # A second search from the page itself swaps the results in place.
    page.fill("main input[name=q]", "badge")
    page.click("main button:has-text('Search')")
    page.wait_for_url("**/search/?q=badge")
    page.locator("#search-entries").wait_for(state="detached")
    assert page.locator("#search-memories .hit").count() == 1
    page.click(f"#search-memories a[href='/memories/{memory.pk}/']")
    page.wait_for_url(f"**/memories/{memory.pk}/")
