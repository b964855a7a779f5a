"""Issue 32's end-to-end check: an untrusted agent writes, in one conversation, an exact
duplicate, two near-duplicates, a same-key contradiction, a third value for that key and a
supersede of another agent's entry block; a reviewer decides each through the console. Then no
store holds two values of one key in force, recall returns one value, the compiled context holds
one copy of each fact, the audit names who decided, and every card said what it touched."""

import pytest

from knowledge.models import AuditEvent, Entry, Memory
from memory.lifecycle.selectors import conflict_pairs
from tests import factory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser
KEY = "customer.acme.contact"


def test_the_messy_agent_meets_a_reviewer(page, world):
    scribe, copilot = world.scribe, world.client("copilot")
    slack = factory.make_memory(
        scribe, "Acme wants support updates in Slack", store="shared", key=KEY, value="Slack"
    )
    contact = factory.make_memory(scribe, "Jane Doe is the main contact at Acme.", store="shared")
    oncall = factory.make_memory(scribe, "Priya is on call this week.", store="shared")
    vpn = factory.make_entry(
        scribe, name="VPN client", store="shared", blocks=["Use client 5.2.0", "Reboot after"]
    )
    block = vpn.created_blocks[0]
    conv = factory.make_conversation(world.copilot, world.general)

    def write(body):
        return copilot.post(
            "/api/memory", {"scope": "shared", "conversation": conv.pk, **body}, format="json"
        )

    duplicate = write({"text": "jane doe is the main contact at Acme."})
    assert duplicate.status_code == 200 and duplicate.json()["duplicate_of"] == contact.pk
    near_contact = write({"text": "Acme's main contact is Jane Doe."}).json()["id"]
    near_oncall = write({"text": "The on-call engineer this week is Priya."}).json()["id"]
    phone = write({"text": "Acme wants support updates by phone", "key": KEY, "value": "phone"}).json()
    email = write({"text": "Acme wants support updates by e-mail", "key": KEY, "value": "e-mail"}).json()
    assert phone["queue_reason"] == email["queue_reason"] == "conflict"
    fix = write({"text": "Use client 5.2.2", "supersedes": block.pk}).json()["id"]
    factory.embed_all()

    login(page, "rita")
    page.goto("/review/")

    def card(memory_id):
        return page.locator(f"#memory-{memory_id}")

    # Every card says what it touches.
    assert f"#{block.pk} (block 1 of entry VPN client, agent scribe)" in card(fix).inner_text()
    assert card(phone["id"]).locator(f"li.conflict[data-memory='{slack.pk}']").count() == 1
    assert card(near_contact).locator(f"li.dup.near[data-memory='{contact.pk}']").count() == 1
    assert card(near_oncall).locator(f"li.dup.near[data-memory='{oncall.pk}']").count() == 1

    # Near-duplicates: one click each.
    for memory_id, original in ((near_contact, contact), (near_oncall, oncall)):
        card(memory_id).locator(f"li.dup[data-memory='{original.pk}'] button[data-duplicate]").click()
        page.locator(f"#memory-{memory_id}.result").wait_for()
        assert f"rejected as a duplicate of #{original.pk}" in card(memory_id).inner_text()

    # The contradiction: approving needs a decision; replace retires Slack.
    card(phone["id"]).locator("input[name=decision][value=replace]").check()
    card(phone["id"]).locator("form[action$='/approve'] button[type=submit]").click()
    page.locator(f"#memory-{phone['id']}.result").wait_for()
    assert f"Retired #{slack.pk}" in card(phone["id"]).inner_text()

    # The third value, seen afresh: it now conflicts with phone; the reviewer rejects it.
    page.goto("/review/")
    assert card(email["id"]).locator(f"li.conflict[data-memory='{phone['id']}']").count() == 1
    card(email["id"]).locator("form[action$='/reject'] input[name=reason]").fill(
        "the customer asked for phone"
    )
    card(email["id"]).locator("form[action$='/reject'] button").click()
    page.locator(f"#memory-{email['id']}.result").wait_for()

    # The block supersede names the entry when it is done.
    card(fix).locator("form[action$='/approve'] button[type=submit]").click()
    page.locator(f"#memory-{fix}.result").wait_for()
    assert "block 1 of entry VPN client" in card(fix).inner_text()

    # No two values of one key in force; recall and context show one value, one copy each.
    assert conflict_pairs() == []
    assert list(Memory.objects.filter(key=KEY, status="active").values_list("value", flat=True)) == ["phone"]
    question = "How does Acme want support updates, and who is the main contact?"
    results = copilot.post(
        "/api/memory/search", {"agent": "copilot", "conversation": conv.pk, "q": question}, format="json"
    ).json()["results"]
    values = [
        r["id"] for r in results if r["kind"] == "memory" and r["id"] in (slack.pk, phone["id"], email["id"])
    ]
    assert values == [phone["id"]]
    context = copilot.post(
        "/api/agents/copilot/context",
        {"conversation": conv.pk, "q": question, "budget_tokens": 1500},
        format="json",
    ).json()
    recalled = context["sections"][-1]["text"].lower()
    assert recalled.count("main contact") <= 1 and "slack" not in recalled

    # The audit names who decided each one; the entry credits the reviewer.
    decided = {near_contact, near_oncall, phone["id"], email["id"], fix}
    events = AuditEvent.objects.filter(action__in=["memory.approved", "memory.rejected"])
    assert {int(i) for e in events for i in e.object_ids} == decided
    assert {e.actor_name for e in events} == {"rita"}
    assert Entry.objects.get(pk=vpn.pk).author_name == "rita"
    page.goto("/knowledge/audit/")
    assert page.locator("text=rita").count() >= 1
