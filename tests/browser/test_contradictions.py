"""Contradictions without a key in the browser (issue 51): the VPN case and the Friday-deploys case
show their related memory on the queue card; choosing 'replace' leaves one answer in recall and
in the compiled context; a contradiction is never labelled a duplicate."""

import pytest
from rest_framework.test import APIClient

from knowledge.models import Memory
from tests import factory
from tests.browser.conftest import login, nav

pytestmark = pytest.mark.browser


def test_the_vpn_and_friday_cases_are_decided_on_the_card(page, world):
    conv = factory.make_conversation(world.copilot, world.general)
    vpn_old = factory.make_memory(world.scribe, "VPN-4012 is fixed by client 5.2.1", store="shared")
    frozen = factory.make_memory(
        world.scribe, "Deploys are prohibited every Friday after 14:00", store="shared"
    )
    email = factory.make_memory(world.scribe, "Acme wants support updates by e-mail only", store="shared")
    vpn_new = factory.make_queued_memory(world.copilot, "VPN-4012 is fixed by client 5.2.3", store="shared")
    friday = factory.make_queued_memory(world.copilot, "Deploys are allowed on Fridays.", store="shared")
    phone = factory.make_queued_memory(
        world.copilot, "Acme wants support updates by phone only", store="shared"
    )
    factory.embed_all()  # vectors too: the near-duplicate hint must not offer the phone/e-mail pair

    login(page, "rita")
    nav(page, "Review queue")
    for queued, old in ((vpn_new, vpn_old), (friday, frozen), (phone, email)):
        card = page.locator(f"#memory-{queued.pk}")
        related = card.locator(f"li.conflict[data-memory='{old.pk}']")
        assert related.count() == 1, queued.text
        assert "contradiction" in related.inner_text()
        assert (
            card.locator("li.dup").count() == 0 and "duplicate" not in card.locator(".conflicts").inner_text()
        )
    assert "5.2.1" in page.locator(f"#memory-{vpn_new.pk} li.conflict").inner_text()

    card = page.locator(f"#memory-{vpn_new.pk}")
    card.locator("input[name=decision][value=replace]").check()
    card.locator("button:has-text('Approve')").first.click()
    page.locator(f"#memory-{vpn_new.pk}.result").wait_for()
    assert Memory.objects.get(pk=vpn_old.pk).status == "superseded"
    assert Memory.objects.get(pk=vpn_new.pk).status == "active"

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.tokens['copilot']}")
    found = client.post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conv.pk, "q": "Which VPN client fixes VPN-4012?"},
        format="json",
    ).json()["results"]
    texts = [r["text"] for r in found if r["kind"] == "memory"]
    assert any("5.2.3" in t for t in texts) and not any("5.2.1" in t for t in texts)
    context = client.post(
        "/api/agents/copilot/context",
        {"conversation": conv.pk, "q": "Which VPN client fixes VPN-4012?", "budget_tokens": 1500},
        format="json",
    )
    assert context.status_code == 200, context.content
    recalled = context.json()["sections"][-1]["text"]
    assert "5.2.3" in recalled and "5.2.1" not in recalled
