import pytest
from playwright.sync_api import expect

from knowledge.models import AuditEvent, Memory
from tests import factory
from tests.browser.conftest import login, nav

pytestmark = pytest.mark.browser


def three_queued(world):
    return [
        factory.make_queued_memory(world.copilot, text, sources=[{"kind": "ticket", "ref": f"INC-{i}"}])
        for i, text in enumerate(
            [
                "Bob owns the billing service.",
                "VPN-4012 is fixed by client 5.2.1.",
                "The Wi-Fi password is on the fridge.",
            ]
        )
    ]


def test_reviewer_bulk_approves_two_rejects_one_and_the_audit_shows_all_three(page, world):
    first, second, third = three_queued(world)
    login(page, "rita")
    nav(page, "Review queue")
    assert page.locator("#queue-count").inner_text() == "3"
    assert page.locator("article.qitem").count() == 3

    page.check(f"#memory-{first.pk} input[name=ids]")
    page.check(f"#memory-{second.pk} input[name=ids]")
    url_before = page.url
    page.click("button:has-text('Approve selected')")
    page.locator("#queue-notice").wait_for()
    assert f"Approved 2 memories ({first.pk}, {second.pk})." in page.locator("#queue-notice").inner_text()
    assert page.locator("#queue-count").inner_text() == "1"
    assert page.locator("article.qitem").count() == 1
    assert page.url == url_before  # htmx: no full reload, no navigation

    card = page.locator(f"#memory-{third.pk}")
    card.locator("form[action$='/reject'] input[name=reason]").fill("a secret, not knowledge")
    card.locator("form[action$='/reject'] button").click()
    page.locator(f"#memory-{third.pk}.result").wait_for()
    assert f"Memory {third.pk} rejected." in page.locator(f"#memory-{third.pk}").inner_text()
    expect(page.locator("#queue-count")).to_have_text("")

    rows = page.locator("#decisions tr.decision")
    assert rows.count() == 3
    text = page.locator("#decisions").inner_text()
    assert text.count("approved") == 2 and "rejected" in text and "a secret, not knowledge" in text
    for memory in (first, second, third):
        assert page.locator(f"#decisions a[href='/memories/{memory.pk}/']").count() == 1

    # The memory page's audit history tells the same story.
    page.click(f"#decisions a[href='/memories/{third.pk}/']")
    assert page.locator("#memory-status").inner_text() == "rejected"
    assert page.locator("#history tr[data-action='memory.rejected']").count() == 1

    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[m.pk] for m in (first, second, third)] == ["active", "active", "rejected"]
    events = AuditEvent.objects.filter(action__in=["memory.approved", "memory.rejected"])
    assert sorted((e.action, e.object_ids[0]) for e in events) == sorted(
        [
            ("memory.approved", str(first.pk)),
            ("memory.approved", str(second.pk)),
            ("memory.rejected", str(third.pk)),
        ]
    )


def test_select_all_and_edit_then_approve(page, world):
    memories = three_queued(world)
    login(page, "rita")
    page.goto("/review/")
    page.check("input[data-check-all=ids]")
    assert page.locator("input[name=ids]:checked").count() == 3
    page.uncheck("input[data-check-all=ids]")
    card = page.locator(f"#memory-{memories[1].pk}")
    card.locator("summary:has-text('Edit, then approve')").click()
    card.locator("textarea[name=text]").fill("VPN-4012 is fixed by client 5.2.2.")
    card.locator("button:has-text('new version')").click()
    page.locator(f"#memory-{memories[1].pk}.result").wait_for()
    assert "edited (new version) and approved" in page.locator(f"#memory-{memories[1].pk}").inner_text()
    assert page.locator("#queue-count").inner_text() == "2"
    memory = Memory.objects.get(pk=memories[1].pk)
    assert (memory.version, memory.text) == (2, "VPN-4012 is fixed by client 5.2.2.")


def test_the_queue_works_without_javascript(browser, live_server, world):
    first, second, third = three_queued(world)
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        login(page, "rita")
        page.goto("/review/")
        page.check(f"#memory-{first.pk} input[name=ids]")
        page.check(f"#memory-{third.pk} input[name=ids]")
        page.fill("#bulk input[name=reason]", "not useful")
        page.click("button:has-text('Reject selected')")
        page.wait_for_url("**/review/")
        assert "Rejected 2 memories" in page.locator(".messages").inner_text()
        assert page.locator("#queue-count").inner_text() == "1"
        page.locator(f"#memory-{second.pk} form[action$='/approve'] button").click()
        page.wait_for_url("**/review/")
        assert f"Memory {second.pk} approved." in page.locator(".messages").inner_text()
        assert page.locator("#queue-empty").is_visible()
    finally:
        context.close()
