import pytest

from knowledge.models import AuditEvent, Memory
from tests.browser.conftest import login, nav
from tests.factory import make_entry

pytestmark = pytest.mark.browser


def test_admin_finds_by_alias_corrects_with_a_reason_and_restores_from_the_audit_tab(page, world):
    entry = make_entry(
        world.copilot,
        name="VPN client",
        type="system",
        aliases=["GlobalProtect"],
        blocks=[{"text": "Use client 5.2.1 for VPN-4012.", "sources": [{"kind": "kb", "ref": "KB-7"}]}],
    )
    make_entry(world.copilot, name="Payroll system")
    block = entry.created_blocks[0]
    login(page, "adam")

    nav(page, "Entries")
    page.fill("#q", "globalprot")
    results = page.locator("#results")
    results.locator("text=Payroll system").wait_for(state="detached")
    results.locator("a:has-text('VPN client')").click()
    page.wait_for_url(f"**/knowledge/entries/{entry.pk}/")

    item = page.locator(f"#block-{block.pk}")
    item.locator("text=Correct").click()
    form = page.locator(f"#block-{block.pk} form")
    form.locator("textarea[name=text]").fill("Use client 5.2.2 for VPN-4012.")
    form.locator("button:has-text('Save correction')").click()
    page.locator(f"#block-{block.pk} >> text=A reason is required to correct a block.").wait_for()
    assert Memory.objects.get(pk=block.pk).version == 1

    page.fill(f"#block-{block.pk} input[name=reason]", "5.2.1 was withdrawn by the vendor")
    page.click(f"#block-{block.pk} button:has-text('Save correction')")
    page.locator(f"#block-{block.pk} .block-version:has-text('v2')").wait_for()
    assert page.locator(f"#block-{block.pk} .block-author").inner_text() == "by person adam"
    assert "Use client 5.2.2" in page.locator(f"#block-{block.pk} .block-text").inner_text()

    page.click("nav[aria-label=Entry] >> text=Projection")
    assert "Use client 5.2.2 for VPN-4012." in page.locator("article.projection").inner_text()

    event = AuditEvent.objects.get(action="block.corrected")
    page.click("nav[aria-label=Knowledge] >> text=Audit")
    row = page.locator(f"#event-{event.pk}")
    row.locator("text=Before/after").click()
    page.locator("del:has-text('5.2.1')").first.wait_for()
    page.locator("ins:has-text('5.2.2')").first.wait_for()
    page.click("text=Preview restore")
    # The click starts a navigation; wait for the preview page rather than test a page mid-load.
    page.locator("text=Nothing has changed yet").wait_for()
    assert Memory.objects.get(pk=block.pk).version == 2
    page.click("button:has-text('Restore 1 record')")
    page.locator("text=Restored 1 record from 1 event").wait_for()

    memory = Memory.objects.get(pk=block.pk)
    assert memory.text == "Use client 5.2.1 for VPN-4012." and memory.version == 3
    page.goto(f"/knowledge/entries/{entry.pk}/")
    assert "Use client 5.2.1" in page.locator(f"#block-{block.pk} .block-text").inner_text()
    assert page.locator(f"#block-{block.pk} .block-version").inner_text() == "v3"


def test_a_batch_restore_is_selected_in_the_audit_tab(page, world):
    entry = make_entry(
        world.copilot, name="Printer", summary="First floor.", blocks=["Toner in the cupboard."]
    )
    login(page, "adam")
    page.goto(f"/knowledge/entries/{entry.pk}/")
    page.fill("#meta textarea[name=summary]", "Third floor.")
    page.click("#meta button:has-text('Save metadata')")
    page.locator("#meta >> text=Saved (version 2)").wait_for()
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"#block-{entry.created_blocks[0].pk} button:has-text('Remove')")
    page.locator("#blocks >> text=No blocks yet.").wait_for()

    page.goto("/knowledge/audit/")
    for action in ("entry.updated", "block.removed"):
        event = AuditEvent.objects.get(action=action)
        page.check(f"#event-{event.pk} input[name=events]")
    page.click("text=Preview restore of selected")
    page.locator("text=restoring 2 records from 2 events").wait_for()
    page.click("button:has-text('Restore 2 records')")
    page.locator("text=Restored 2 records from 2 events").wait_for()
    page.goto(f"/knowledge/entries/{entry.pk}/")
    assert page.locator("#meta textarea[name=summary]").input_value() == "First floor."
    assert page.locator("#blocks >> text=Toner in the cupboard.").is_visible()
