from pathlib import Path

import pytest

from knowledge.models import Entry, Memory
from tests import factory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser


def test_export_then_import_through_the_console_buttons(page, world, tmp_path):
    factory.make_entry(world.copilot, name="VPN", blocks=["Client 5.2.1 fixes sleep drops."])
    factory.make_memory(world.copilot, "Bob owns billing.", store="shared")
    login(page, "adam")
    page.goto(f"/agents/{world.copilot.name}/")
    with page.expect_download() as info:
        page.click("#export-knowledge")
    path = tmp_path / "copilot.brain.jsonl"
    info.value.save_as(path)
    assert Path(path).read_text().startswith('{"agent": "copilot", "type": "brain-agent-export"')

    page.goto("/agents/")
    form = page.locator("#agent-import form")
    form.locator("input[name=file]").set_input_files(str(path))
    form.locator("input[name=as_name]").fill("copilot-copy")
    form.locator("button:has-text('Import')").click()
    page.wait_for_url("**/agents/copilot-copy/")
    assert "Imported into copilot-copy" in page.locator(".messages").inner_text()
    assert Entry.objects.filter(owner__name="copilot-copy", name="VPN").count() == 1
    assert (
        Memory.objects.filter(owner__name="copilot-copy").count()
        == Memory.objects.filter(owner=world.copilot).count()
    )

    # The same file again: nothing changes, and the page says so.
    page.goto("/agents/")
    form.locator("input[name=file]").set_input_files(str(path))
    form.locator("input[name=as_name]").fill("copilot-copy")
    form.locator("button:has-text('Import')").click()
    page.wait_for_url("**/agents/copilot-copy/")
    assert "nothing changed" in page.locator(".messages").inner_text()

    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text() + "{oops\n")
    page.goto("/agents/")
    form.locator("input[name=file]").set_input_files(str(bad))
    form.locator("button:has-text('Import')").click()
    assert "not JSON" in page.locator("#import-errors").inner_text()
