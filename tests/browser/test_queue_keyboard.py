"""The review queue by keyboard alone: a skip link to the first memory, a/j/k, focus moving on
after each decision, the shortcut list, and a bulk selection that survives a refused action."""

import re

import pytest
from playwright.sync_api import expect

from knowledge.models import Memory
from tests import factory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser


def _queued(world, n):
    # Unrelated facts: texts that differ only in a number contradict each other once one is
    # approved (memory.matching.relations), and these tests are about plain approvals.
    return [factory.make_queued_memory(world.copilot, f"{fact} (billing).") for fact in BILLING_FACTS[:n]]


def _settled(page, target):
    """Wait for htmx to finish settling a swap into `target` (the new content's own handlers are
    wired by then), as a person reading it would."""
    page.locator(f"{target}.htmx-settling").wait_for(state="detached")


def _wait_focus(page, element_id):
    # expect() polls from Python; a string predicate (wait_for_function) is evaluated with eval
    # in the page once the first check fails, which the page's CSP refuses.
    expect(page.locator(f"#{element_id}")).to_be_focused()


def test_a_reviewer_approves_three_memories_with_the_keyboard_only(page, world):
    memories = _queued(world, 4)
    login(page, "rita")
    page.goto("/review/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to the first memory"
    page.keyboard.press("Enter")
    _wait_focus(page, f"memory-{memories[0].pk}")

    page.keyboard.press("a")
    page.locator(f"#memory-{memories[0].pk}.result").wait_for()
    _wait_focus(page, f"memory-{memories[1].pk}")  # focus moved on to the next memory

    page.keyboard.press("a")
    page.locator(f"#memory-{memories[1].pk}.result").wait_for()
    _wait_focus(page, f"memory-{memories[2].pk}")

    page.keyboard.press("j")
    _wait_focus(page, f"memory-{memories[3].pk}")
    page.keyboard.press("k")
    _wait_focus(page, f"memory-{memories[2].pk}")
    page.keyboard.press("a")
    page.locator(f"#memory-{memories[2].pk}.result").wait_for()
    _wait_focus(page, f"memory-{memories[3].pk}")

    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[m.pk] for m in memories] == ["active", "active", "active", "queued"]
    expect(page.locator("#queue-count")).to_have_text("1")


def test_reject_by_keyboard_asks_for_the_reason_then_moves_on(page, world):
    first, second = _queued(world, 2)
    login(page, "rita")
    page.goto("/review/")
    page.locator(f"#memory-{first.pk}").focus()
    page.keyboard.press("r")
    assert page.evaluate("document.activeElement.name") == "reason"
    page.keyboard.type("not a fact")
    page.keyboard.press("Enter")
    page.locator(f"#memory-{first.pk}.result").wait_for()
    _wait_focus(page, f"memory-{second.pk}")
    first.refresh_from_db()
    assert first.status == "rejected"


def test_question_mark_lists_the_shortcuts(page, world):
    _queued(world, 1)
    login(page, "rita")
    page.goto("/review/")
    assert not page.locator("#queue-keys").is_visible()
    page.keyboard.press("?")
    assert page.locator("#queue-keys").is_visible()
    assert "approve the memory in focus" in page.locator("#queue-keys").inner_text()
    page.keyboard.press("Escape")
    assert not page.locator("#queue-keys").is_visible()


def test_the_selection_is_kept_after_a_refused_bulk_action(page, world):
    first, second, third = _queued(world, 3)
    login(page, "rita")
    page.goto("/review/")
    page.locator(f"#memory-{first.pk}").focus()
    page.keyboard.press("x")
    page.check(f"#memory-{third.pk} input[name=ids]")
    page.click("button:has-text('Reject selected')")  # no reason given: refused
    page.locator("#queue-notice.error").wait_for()
    assert page.is_checked(f"#memory-{first.pk} input[name=ids]")
    assert not page.is_checked(f"#memory-{second.pk} input[name=ids]")
    assert page.is_checked(f"#memory-{third.pk} input[name=ids]")
    assert set(Memory.objects.values_list("status", flat=True)) == {"queued"}


def test_every_decision_of_a_mixed_queue_has_a_key_across_two_pages(page, world):
    """Issue 53: approve, both conflict choices (no browser validation prompt, no arrow keys in
    the date), reject as a duplicate, reject with a reason, and on to the next page — keys only."""
    copilot = world.copilot
    slack = factory.make_memory(copilot, "Acme prefers Slack", key="acme.channel", value="slack")
    nine = factory.make_memory(copilot, "The office opens at 9", key="office.opens", value="9")
    priya = factory.make_memory(world.scribe, "Priya is on call this week.", store="shared")
    plain = factory.make_queued_memory(copilot, "Bob owns the billing service.")
    email = factory.make_queued_memory(copilot, "Acme prefers e-mail", key="acme.channel", value="email")
    eight = factory.make_queued_memory(copilot, "The office opens at 8", key="office.opens", value="8")
    dup = factory.make_queued_memory(copilot, "priya is on call this week.", store="shared", tier="episodic")
    wrong = factory.make_queued_memory(copilot, "The moon is made of cheese.")
    filler = _queued(world, 6)  # the 11th memory is on page 2
    login(page, "rita")
    page.goto("/review/")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    _wait_focus(page, f"memory-{plain.pk}")

    page.keyboard.press("a")
    _wait_focus(page, f"memory-{email.pk}")
    page.keyboard.press("a")  # a conflict without a choice: the keys are named, nothing is sent
    expect(page.locator(f"#memory-{email.pk} .decide-hint")).to_contain_text("1 replaces, 2 keeps both")
    page.keyboard.press("1")  # replace: asks first, naming what it retires; Enter approves
    expect(page.locator(f"#memory-{email.pk} .confirm-hint")).to_contain_text(
        "Enter approves and retires them"
    )
    assert Memory.objects.get(pk=slack.pk).status == "active"
    page.keyboard.press("Enter")
    page.locator(f"#memory-{email.pk}.result").wait_for()
    _wait_focus(page, f"memory-{eight.pk}")

    page.keyboard.press("2")  # the boundary is filled in and focused; Enter approves
    assert page.evaluate("document.activeElement.name") == "boundary"
    page.keyboard.press("Enter")
    page.locator(f"#memory-{eight.pk}.result").wait_for()
    _wait_focus(page, f"memory-{dup.pk}")

    page.keyboard.press("d")  # asks first: the duplicate's button is focused, Enter rejects
    expect(page.locator(f"#memory-{dup.pk} .confirm-hint")).to_contain_text(
        f"Reject as duplicate of #{priya.pk}?"
    )
    assert Memory.objects.get(pk=dup.pk).status == "queued"
    page.keyboard.press("Enter")
    page.locator(f"#memory-{dup.pk}.result").wait_for()
    _wait_focus(page, f"memory-{wrong.pk}")
    page.keyboard.press("r")
    page.keyboard.type("not a fact")
    page.keyboard.press("Enter")
    page.locator(f"#memory-{wrong.pk}.result").wait_for()
    _wait_focus(page, f"memory-{filler[0].pk}")

    page.keyboard.press("n")  # the next page, its first memory in focus
    _wait_focus(page, f"memory-{filler[-1].pk}")
    assert f"after={filler[4].pk}" in page.url  # the next page starts after the last one shown
    page.keyboard.press("?")
    keys = page.locator("#queue-keys").inner_text()
    assert "reject as a duplicate" in keys and "keep both" in keys and "everything the filter matches" in keys

    rows = {
        m.pk: m
        for m in Memory.objects.filter(
            pk__in=[slack.pk, nine.pk, plain.pk, email.pk, eight.pk, dup.pk, wrong.pk]
        )
    }
    assert rows[plain.pk].status == rows[email.pk].status == rows[eight.pk].status == "active"
    assert rows[slack.pk].status == "superseded"
    assert rows[nine.pk].status == "active" and rows[nine.pk].valid_to == rows[eight.pk].valid_from
    assert (rows[dup.pk].status, rows[dup.pk].status_reason) == ("rejected", f"duplicate of #{priya.pk}")
    assert (rows[wrong.pk].status, rows[wrong.pk].status_reason) == ("rejected", "not a fact")


@pytest.mark.parametrize("how", ["queue", "own page"])
def test_one_persons_import_is_approved_as_a_batch_in_a_few_keys(page, world, how):
    """From the queue, A asks in place (htmx); a key pressed before the page's script has bound
    the link opens the confirmation as a page of its own, whose Enter must decide the same."""
    from knowledge.models import AuditEvent
    from knowledge.principal import Principal
    from memory.lifecycle.write import WriteRequest, memory_write

    def mem0(i, person):
        return memory_write(
            actor=Principal.system("import_mem0"),
            request=WriteRequest(
                owner=world.copilot,
                store=f"private:{person}",
                text=f"{person} fact {i}",
                category="mem0",
                sources=[{"kind": "record", "ref": f"mem0:{person}-{i}"}],
            ),
            route="import",
        )

    alice = [mem0(i, "alice") for i in range(12)]
    bob = mem0(0, "bob")
    login(page, "rita")
    if how == "queue":
        page.goto("/review/?import=mem0&store=private:alice")
        page.keyboard.press("A")
    else:
        page.goto("/review/all?import=mem0&store=private:alice&action=approve")
    expect(page.locator("#confirm-matching")).to_be_focused()
    expect(page.locator("#confirm-bulk")).to_contain_text("Approve 12 memories?")
    page.keyboard.press("Enter")
    # in place the queue's notice says it; after the page's post, the page's message
    notice = page.locator("#queue-notice" if how == "queue" else "ul.messages")
    expect(notice).to_contain_text("Approved 12 memories matching the filter")
    if how == "own page":
        expect(page).to_have_url(re.compile(r"/review/\?.*private(:|%3A)alice"))  # back on the filtered queue
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert {statuses[m.pk] for m in alice} == {"active"} and statuses[bob.pk] == "queued"
    batches = set(AuditEvent.objects.filter(action="memory.approved").values_list("batch_id", flat=True))
    assert len(batches) == 1  # one batch, restorable from the Audit tab
    if how == "queue":  # the notice links to that batch in the audit trail
        page.locator("#queue-notice-batch").click()
        expect(page.locator("#audit-batch")).to_contain_text(str(batches.pop()))
        # (with them, the contradictions the approvals left marked among these look-alike facts)
        expect(page.locator("#events tbody tr", has_text="memory.approved")).to_have_count(12)


BILLING_FACTS = [  # twenty facts sharing no word but "billing", so none relates to another
    "Acme settles by bank transfer",
    "Globex receives paper statements",
    "Initech purchase orders need references",
    "Credit notes are numbered yearly",
    "Umbrella's VAT number is on file",
    "Hooli asked for monthly summaries",
    "Stark Industries uses US dollars",
    "Wayne Enterprises has a discount agreement",
    "Dunder Mifflin sends remittance advice",
    "Soylent's account is on hold",
    "Vandelay prefers SEPA direct debit",
    "Cyberdyne wants everything sent to Zurich",
    "Tyrell needs German translations",
    "Oscorp's contract renews in spring",
    "Aperture's contact person is Glados",
    "Massive Dynamic accepts PDF only",
    "Prestige Worldwide has unlimited spending",
    "Gringotts charges wire fees",
    "Monsters Inc pays quarterly",
    "Pied Piper's card expired",
]


def test_a_mixed_queue_of_thirty_is_worked_through_without_the_mouse(page, world):
    """Issue 53: thirty queued memories over three pages — approve, replace, keep both, reject a
    conflict, reject as a duplicate, edit then approve, open the source and come back, reject
    with a reason, skip one, then filter with / and approve the rest that match with A, Enter."""
    copilot = world.copilot
    slack = factory.make_memory(copilot, "Acme prefers Slack", key="acme.channel", value="slack")
    nine = factory.make_memory(copilot, "The office opens at 9", key="office.opens", value="9")
    noon = factory.make_memory(copilot, "Lunch is at noon", key="lunch.time", value="12:00")
    priya = factory.make_memory(world.scribe, "Priya is on call this week.", store="shared")
    cards = [
        factory.make_queued_memory(copilot, "Bob owns the billing service."),
        factory.make_queued_memory(copilot, "Acme prefers e-mail", key="acme.channel", value="email"),
        factory.make_queued_memory(copilot, "The office opens at 8", key="office.opens", value="8"),
        factory.make_queued_memory(copilot, "Lunch is at eleven", key="lunch.time", value="11:00"),
        factory.make_queued_memory(copilot, "priya is on call this week.", store="shared", tier="episodic"),
        factory.make_queued_memory(copilot, "Invoices go out on the 1st."),
        factory.make_queued_memory(
            copilot, "Acme's Slack is acme.slack.com", sources=[{"kind": "memory", "ref": str(slack.pk)}]
        ),
        factory.make_queued_memory(copilot, "The moon is made of cheese."),
        factory.make_queued_memory(copilot, "A memory the reviewer leaves for later."),
        factory.make_queued_memory(copilot, "Carol approves refunds over 500 EUR."),
    ]
    rest = [factory.make_queued_memory(copilot, f"{fact} (billing).") for fact in BILLING_FACTS]
    (plain, email, eight, eleven, dup, invoices, slack_url, moon, later, carol) = cards
    login(page, "rita")
    page.goto("/review/")
    expect(page.locator("#queue nav.pager").first).to_contain_text("page 1 of 3 · 30 matches")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    _wait_focus(page, f"memory-{plain.pk}")

    def decided(memory, then):
        page.locator(f"#memory-{memory.pk}.result").wait_for()
        _wait_focus(page, f"memory-{then.pk}")

    page.keyboard.press("a")
    decided(plain, email)
    page.keyboard.press("1")  # replace, once Enter confirms
    page.keyboard.press("Enter")
    decided(email, eight)
    page.keyboard.press("2")  # keep both: the date is focused, Enter approves
    assert page.evaluate("document.activeElement.name") == "boundary"
    page.keyboard.press("Enter")
    decided(eight, eleven)
    page.keyboard.press("r")  # a conflict rejected: neither memory changes
    page.keyboard.type("lunch did not move")
    page.keyboard.press("Enter")
    decided(eleven, dup)
    page.keyboard.press("d")
    page.keyboard.press("Enter")
    decided(dup, invoices)
    page.keyboard.press("e")
    page.keyboard.press("Control+a")
    page.keyboard.type("Invoices go out on the 2nd.")
    page.keyboard.press("Control+Enter")
    decided(invoices, slack_url)

    page.keyboard.press("o")  # its source, the memory it cites; then back to the queue
    page.wait_for_url(f"**/memories/{slack.pk}/")
    page.go_back()
    page.locator(f"#memory-{slack_url.pk}").wait_for()
    if not page.evaluate("document.activeElement.closest('article.qitem')"):
        page.keyboard.press("j")  # no card in focus after a fresh load: j takes the first
    _wait_focus(page, f"memory-{slack_url.pk}")
    page.keyboard.press("a")
    decided(slack_url, moon)
    page.keyboard.press("r")
    page.keyboard.type("not a fact")
    page.keyboard.press("Enter")
    decided(moon, later)
    page.keyboard.press("j")  # left for later
    _wait_focus(page, f"memory-{carol.pk}")
    page.keyboard.press("a")
    decided(carol, rest[0])  # the page was loaded afresh on coming back: it runs on to rest[5]
    page.keyboard.press("a")
    decided(rest[0], rest[1])

    page.keyboard.press("n")  # page 2 starts after the last memory page 1 showed
    _wait_focus(page, f"memory-{rest[6].pk}")
    assert f"after={rest[5].pk}" in page.url
    page.keyboard.press("a")
    decided(rest[6], rest[7])
    page.keyboard.press("p")  # and back
    _wait_focus(page, f"memory-{later.pk}")

    page.keyboard.press("/")
    page.keyboard.type("(billing)")
    page.keyboard.press("Enter")
    expect(page.locator("#approve-matching")).to_contain_text("Approve all 18 matching")
    _settled(page, "#queue")
    page.keyboard.press("Escape")  # back out of the text field, then decide all that match
    page.keyboard.press("A")
    expect(page.locator("#confirm-bulk")).to_contain_text("Approve 18 memories?")
    _settled(page, "#bulk-confirm")
    page.keyboard.press("Enter")
    # htmx swaps the notice in; a confirmation faster than htmx wires the new form posts it
    # plainly, and the page comes back with the same words as a message.
    expect(page.locator("main")).to_contain_text("Approved 18 memories matching the filter", timeout=15_000)
    page.keyboard.press("?")
    keys = page.locator("#queue-keys").inner_text()
    for what in ("reject as a duplicate", "replace", "keep both", "reject", "open its first source", "edit"):
        assert what in keys, what

    status = dict(Memory.objects.values_list("pk", "status"))
    assert [status[m.pk] for m in cards] == [
        "active", "active", "active", "rejected", "rejected", "active", "active", "rejected", "queued", "active",
    ]  # fmt: skip
    assert {status[m.pk] for m in rest} == {"active"}
    assert (status[slack.pk], status[nine.pk], status[noon.pk], status[priya.pk]) == (
        "superseded", "active", "active", "active",
    )  # fmt: skip
    invoices.refresh_from_db()
    assert (invoices.text, invoices.version) == ("Invoices go out on the 2nd.", 2)
    assert Memory.objects.get(pk=dup.pk).status_reason == f"duplicate of #{priya.pk}"
    assert list(Memory.objects.filter(status="queued").values_list("pk", flat=True)) == [later.pk]


def test_typing_on_a_filter_picks_only_an_option_that_starts_with_it(page, world):
    """Typing "cu" on the Category filter never picks "contact": with no category starting "cu"
    the filter stays as it was; once there is one ("customer") it is the one picked."""
    factory.make_queued_memory(world.copilot, "Alice's phone is 555-0100.", category="contact")
    login(page, "rita")
    page.goto("/review/")
    category = page.locator("#queue-filters select[name=category]")
    category.focus()
    page.keyboard.type("cu")
    page.wait_for_timeout(1200)  # longer than the pause after which a typed choice applies
    expect(category).to_have_value("")
    assert "category=" not in page.url

    factory.make_queued_memory(world.copilot, "Bob's account is on the gold plan.", category="customer")
    page.goto("/review/")
    page.locator("#queue-filters select[name=category]").focus()
    page.keyboard.type("cu")
    page.wait_for_url(re.compile(r"category=customer"))
    expect(page.locator("#queue-filters select[name=category]")).to_have_value("customer")
    expect(page.locator("#queue-items article.qitem")).to_have_count(1)
