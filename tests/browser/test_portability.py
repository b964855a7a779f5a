from pathlib import Path

import pytest

from knowledge.models import Entry, Memory
from tests import factory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser


def test_export_then_import_through_the_console_buttons(page, world, tmp_path):
    """Export, then import under a new name: a preview first (nothing written), then the import
    of the same file; the agent's own stores come in, the shared ones stay where they are."""
    factory.make_entry(world.copilot, name="VPN", store="self", blocks=["Client 5.2.1 fixes sleep drops."])
    factory.make_memory(world.copilot, "Bob owns billing.", store="shared")
    factory.make_memory(world.copilot, "Alice prefers e-mail.", store="self")
    login(page, "adam")
    page.goto(f"/agents/{world.copilot.name}/")
    with page.expect_download() as info:
        page.click("#export-knowledge")
    path = tmp_path / "copilot.brain.jsonl"
    info.value.save_as(path)
    assert Path(path).read_text().startswith('{"agent": "copilot", "type": "brain-agent-export"')

    def import_file(file):
        page.goto("/agents/")
        form = page.locator("#agent-import form")
        form.locator("input[name=file]").set_input_files(str(file))
        form.locator("input[name=as_name]").fill("copilot-copy")
        form.locator("button:has-text('Preview')").click()
        page.wait_for_selector("#import-preview")
        assert "Nothing has been written yet" in page.content()
        assert (
            Memory.objects.filter(owner__name="copilot-copy").count() == written[-1]
        )  # preview wrote nothing
        confirm = page.locator("form:has(input[name=previewed])")
        confirm.locator("input[name=file]").set_input_files(str(file))
        confirm.locator("button:has-text('Import')").click()
        page.wait_for_url("**/agents/copilot-copy/")
        written.append(Memory.objects.filter(owner__name="copilot-copy").count())
        return page.locator(".messages").inner_text()

    written = [0]
    assert "Imported into copilot-copy" in import_file(path)
    assert Entry.objects.filter(owner__name="copilot-copy", name="VPN").count() == 1
    own = set(Memory.objects.filter(owner__name="copilot-copy").values_list("text", flat=True))
    assert "Alice prefers e-mail." in own and "Bob owns billing." not in own  # shared stays shared

    # The same file again: nothing changes, and the page says so.
    assert "nothing changed" in import_file(path)

    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text() + "{oops\n")
    page.goto("/agents/")
    form = page.locator("#agent-import form")
    form.locator("input[name=file]").set_input_files(str(bad))
    form.locator("button:has-text('Preview')").click()
    assert "not JSON" in page.locator("#import-errors").inner_text()
