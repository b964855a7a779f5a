import hashlib
from pathlib import Path

import pytest

from tests.browser.conftest import login, nav
from tests.knowledge.materials.documents import pdf_bytes

pytestmark = pytest.mark.browser


def test_admin_uploads_a_file_watches_it_learn_opens_the_citing_entry_and_downloads_the_original(
    page, world, tmp_path
):
    data = pdf_bytes(["Refunds are paid within 30 days.", "The office is in Lisbon."])
    path = tmp_path / "refund-policy.pdf"
    path.write_bytes(data)
    login(page, "adam")

    nav(page, "Entries")
    page.click("nav.tabs >> text=Materials")
    page.wait_for_url("**/knowledge/materials/")
    form = page.locator("#learn-form form")
    form.locator("select[name=agent]").select_option("copilot")
    form.locator("input[name=file]").set_input_files(str(path))
    form.locator("button:has-text('Learn')").click()
    page.wait_for_url("**/knowledge/materials/*/")
    page.locator("#material-state-badge:has-text('learned')").wait_for()
    assert "refund-policy.pdf" in page.locator("h2").inner_text()

    with page.expect_download() as info:
        page.click("#download-original")
    download = info.value
    assert hashlib.sha256(Path(download.path()).read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()

    page.click("#citing-entries a")
    page.wait_for_url("**/knowledge/entries/*/")
    page.locator("text=Refunds are paid within 30 days.").first.wait_for()

    page.goto(page.url.split("/knowledge/")[0] + "/knowledge/materials/")
    page.locator("#materials >> text=refund-policy.pdf").wait_for()
    page.locator("#materials >> text=learned").wait_for()


def test_pasted_web_content_reads_like_the_page_and_a_missing_title_is_asked_for_beside_its_field(
    page, world
):
    """Issue 53: pasted text without a title is refused beside the Title field (what was pasted
    stays); a pasted page without a title takes its own, and its first block is its content, not
    its navigation."""
    from knowledge.models import Material
    from tests.knowledge.materials.test_html_pages import GUEST_WIFI

    login(page, "rita")
    page.goto("/knowledge/materials/")
    form = page.locator("#learn-form form")
    form.locator("select[name=agent]").select_option("copilot")
    form.locator("textarea[name=text]").fill("Visitors sign in at reception.")
    form.locator("button:has-text('Learn')").click()
    title = page.locator("#learn-form label", has=page.locator("input[name=title]"))
    title.locator(".error:has-text('Give a title')").wait_for()
    assert page.locator("#learn-form input[name=title]").get_attribute("aria-invalid") == "true"
    assert page.locator("#learn-form textarea[name=text]").input_value() == "Visitors sign in at reception."
    assert not Material.objects.exists()

    page.locator("#learn-form textarea[name=text]").fill("")
    page.locator("#learn-form textarea[name=html]").fill(GUEST_WIFI)
    page.locator("#learn-form button:has-text('Learn')").click()
    page.wait_for_url("**/knowledge/entries/*/**")
    body = page.locator("main").inner_text()
    assert "Guest Wi-Fi: IT desk" in body and "The guest network is Acme-Guest." in body
    assert "Home | Menu | Login" not in body and "Privacy" not in body
    assert Material.objects.get().title == "Guest Wi-Fi"
