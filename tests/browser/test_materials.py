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
