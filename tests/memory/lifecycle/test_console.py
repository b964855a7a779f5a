"""The review queue and the memories pages in the console, over HTTP (htmx and plain posts)."""

import re

import pytest

from knowledge.models import AuditEvent, Memory
from memory.lifecycle import review
from tests import factory

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def rita(client, world):
    client.force_login(world.reviewer)
    return client


def queued(world, text="VPN-4012 is fixed by client 5.2.1", **fields):
    return factory.make_queued_memory(world.copilot, text, **fields)


def badge(html: bytes) -> str:
    match = re.search(rb'<span id="queue-count"[^>]*>([^<]*)</span>', html)
    assert match, "no queue badge"
    return match.group(1).decode()


# --- the queue page -------------------------------------------------------------------------


def test_the_queue_lists_waiting_memories_with_agent_store_reason_and_sources(rita, world):
    memory = queued(world, sources=[{"kind": "kb", "ref": "KB-7"}], category="fact")
    Memory.objects.filter(pk=memory.pk).update(
        queue_reason="requeued", status_reason="re-check: its source kb:KB-7 changed"
    )
    factory.make_memory(world.copilot, "active, not listed")
    page = rita.get("/review/")
    assert page.status_code == 200
    body = page.content.decode()
    assert f'id="memory-{memory.pk}"' in body
    assert "VPN-4012 is fixed by client 5.2.1" in body
    assert "kb:KB-7" in body and "fact" in body and "copilot" in body
    assert "requeued: a source changed" in body
    assert "re-check: its source kb:KB-7 changed" in body
    assert "active, not listed" not in body
    assert badge(page.content) == "1"


def test_the_queue_shows_a_diff_against_the_memory_it_would_supersede(rita, world):
    old = factory.make_memory(world.copilot, "VPN-4012 is fixed by client 5.2.0 <b>")
    queued(world, "VPN-4012 is fixed by client 5.2.1 <b>", supersedes=old)
    body = rita.get("/review/").content.decode()
    assert "Would supersede" in body
    assert "5.2.<del>0</del><ins>1</ins>" in body
    assert "<b>" not in body.split("Would supersede")[1].split("</article>")[0]
    assert "&lt;b&gt;" in body


def test_the_queue_shows_a_same_key_contradiction_and_can_retire_it(rita, world):
    fact = factory.make_memory(world.copilot, "Acme prefers Slack", key="acme.channel", value="slack")
    memory = queued(world, "Acme prefers e-mail", key="acme.channel", value="email")
    body = rita.get("/review/").content.decode()
    assert "Contradicts active memory" in body
    rita.post(f"/review/{memory.pk}/approve", {"supersedes": str(fact.pk)})
    fact.refresh_from_db()
    assert fact.status == Memory.SUPERSEDED and fact.superseded_by_id == memory.pk


def test_the_queue_filters_by_reason_and_owner(rita, world):
    new = queued(world, "plain new")
    merge = queued(world, "a merge")
    Memory.objects.filter(pk=merge.pk).update(queue_reason="merge")
    scribes = factory.make_queued_memory(world.scribe, "scribe's")
    body = rita.get("/review/?reason=merge").content.decode()
    assert f'id="memory-{merge.pk}"' in body and f'id="memory-{new.pk}"' not in body
    rita.post("/owner", {"owner": "scribe", "next": "/review/"})
    body = rita.get("/review/").content.decode()
    assert f'id="memory-{scribes.pk}"' in body and f'id="memory-{new.pk}"' not in body
    assert badge(body.encode()) == "1"


def test_the_queue_page_uses_a_fixed_number_of_queries(rita, world, django_assert_max_num_queries):
    old = factory.make_memory(world.copilot, "old")
    for i in range(3):
        queued(world, f"q{i}", sources=[{"kind": "kb", "ref": f"KB-{i}"}], key="k", value=i)
    rita.get("/review/")
    # + 1: the duplicate hints of the whole page (exact and near, one round trip); + 5: the
    # matching count, the page's ids and the facet counts (the facets the filter leaves open in
    # one grouped statement, sources, imports)
    with django_assert_max_num_queries(19) as few:
        rita.get("/review/")
    for i in range(12):
        queued(
            world,
            f"more {i}",
            sources=[{"kind": "kb", "ref": f"KB-{i}"}],
            supersedes=old,
            key="k",
            value=100 + i,
        )
    with django_assert_max_num_queries(len(few)):
        rita.get("/review/")


def test_people_without_a_role_and_anonymous_users_are_kept_out(client, world):
    assert client.get("/review/").status_code == 302
    from django.contrib.auth import get_user_model

    nobody = get_user_model().objects.create_user("nobody", password="x" * 12)
    client.force_login(nobody)
    assert client.get("/review/").status_code == 403
    memory = queued(world)
    assert client.post(f"/review/{memory.pk}/approve").status_code == 403
    assert Memory.objects.get(pk=memory.pk).status == Memory.QUEUED


# --- actions without JavaScript -----------------------------------------------------------


def test_approve_with_a_plain_form_post_redirects_with_a_message(rita, world):
    memory = queued(world)
    response = rita.post(f"/review/{memory.pk}/approve", {"next": "/review/?reason=new"}, follow=True)
    assert response.redirect_chain[-1][0] == "/review/?reason=new"
    assert f"Memory {memory.pk} approved." in response.content.decode()
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE
    assert AuditEvent.objects.get(action="memory.approved").actor_name == "rita"


def test_next_cannot_redirect_off_site(rita, world):
    memory = queued(world)
    response = rita.post(f"/review/{memory.pk}/approve", {"next": "https://evil.example/"})
    assert response["Location"] == "/review/"


def test_reject_needs_a_reason_in_the_console_too(rita, world):
    memory = queued(world)
    response = rita.post(f"/review/{memory.pk}/reject", {"reason": ""}, follow=True)
    assert "Say why the memory is rejected." in response.content.decode()
    assert Memory.objects.get(pk=memory.pk).status == Memory.QUEUED
    rita.post(f"/review/{memory.pk}/reject", {"reason": "wrong version"})
    memory.refresh_from_db()
    assert (memory.status, memory.status_reason) == (Memory.REJECTED, "wrong version")


def test_edit_then_approve_makes_a_new_version(rita, world):
    memory = queued(world, "VPN fixed by 5.2.0")
    rita.post(f"/review/{memory.pk}/edit", {"text": "VPN fixed by 5.2.1", "reason": "typo"})
    memory.refresh_from_db()
    assert (memory.status, memory.version, memory.text) == (Memory.ACTIVE, 2, "VPN fixed by 5.2.1")
    assert memory.versions.get(version=2).author_name == "rita"
    response = rita.post(f"/review/{queued(world).pk}/edit", {"text": ""}, follow=True)
    assert "may not be empty" in response.content.decode()


def test_bulk_approve_and_reject_with_plain_posts(rita, world):
    a, b, c = (queued(world, t) for t in ("one", "two", "three"))
    response = rita.post("/review/bulk", {"ids": [a.pk, b.pk], "action": "approve"}, follow=True)
    assert f"Approved 2 memories ({a.pk}, {b.pk})." in response.content.decode()
    response = rita.post("/review/bulk", {"ids": [c.pk], "action": "reject"}, follow=True)
    assert "Say why the memories are rejected." in response.content.decode()
    rita.post("/review/bulk", {"ids": [c.pk], "action": "reject", "reason": "duplicate"})
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[m.pk] for m in (a, b, c)] == [Memory.ACTIVE, Memory.ACTIVE, Memory.REJECTED]
    response = rita.post("/review/bulk", {"action": "approve"}, follow=True)
    assert "Select at least one memory." in response.content.decode()


# --- actions with htmx --------------------------------------------------------------------


def test_htmx_approve_swaps_the_card_and_updates_badge_and_decisions(rita, world):
    memory, other = queued(world), queued(world, "another")
    response = rita.post(f"/review/{memory.pk}/approve", **HX)
    body = response.content.decode()
    assert "<html" not in body
    assert f'id="memory-{memory.pk}"' in body and f"Memory {memory.pk} approved." in body
    assert f'id="memory-{other.pk}"' not in body
    assert 'id="queue-count"' in body and 'hx-swap-oob="true"' in body
    assert badge(response.content) == "1"
    assert 'id="decisions" hx-swap-oob="true"' in body and "approved" in body


def test_htmx_reject_without_reason_keeps_the_card_with_an_error(rita, world):
    memory = queued(world)
    body = rita.post(f"/review/{memory.pk}/reject", {"reason": ""}, **HX).content.decode()
    assert 'role="alert"' in body and "Say why the memory is rejected." in body
    assert "Reject</button>" in body  # the card is still there to try again


def test_htmx_bulk_rerenders_the_queue(rita, world):
    a, b, c = (queued(world, t) for t in ("one", "two", "three"))
    response = rita.post("/review/bulk", {"ids": [a.pk, b.pk], "action": "approve"}, **HX)
    body = response.content.decode()
    assert "<html" not in body
    assert f'id="memory-{c.pk}"' in body and f'id="memory-{a.pk}"' not in body
    assert "Approved 2 memories" in body
    assert badge(response.content) == "1"


def test_the_second_reviewer_is_told_clearly_and_nothing_is_applied_twice(client, world):
    """Rita and Adam both have the queue open; Rita approves first, then Adam rejects."""
    memory = queued(world)
    client.force_login(world.reviewer)
    client.post(f"/review/{memory.pk}/approve", **HX)
    client.force_login(world.admin)
    body = client.post(f"/review/{memory.pk}/reject", {"reason": "too late"}, **HX).content.decode()
    assert (
        f"Memory {memory.pk} is active now (approved by rita); it cannot be rejected. Nothing was changed."
        in body
    )
    response = client.post(f"/review/{memory.pk}/approve", follow=True)
    assert "approved by rita" in response.content.decode()
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE
    assert AuditEvent.objects.filter(action__in=["memory.approved", "memory.rejected"]).count() == 1
    # In a bulk action the taken memory is reported and the rest still decided.
    fresh = queued(world, "fresh")
    body = client.post(
        "/review/bulk", {"ids": [memory.pk, fresh.pk], "action": "reject", "reason": "dup"}, **HX
    )
    assert "Rejected 1 memory" in body.content.decode() and "approved by rita" in body.content.decode()


def test_the_badge_endpoint_and_navigation(rita, world):
    queued(world)
    queued(world, "VPN-4013 is fixed by a reboot")
    assert badge(rita.get("/review/count").content) == "2"
    home = rita.get("/").content.decode()
    assert "Review queue" in home and "Memories" in home
    assert badge(home.encode()) == "2"


# --- memories pages -------------------------------------------------------------------------


def test_memories_list_filters_by_tier_status_store_and_owner(rita, world):
    factory.make_memory(world.copilot, "semantic copilot")
    factory.make_memory(world.copilot, "working copilot", tier="working")
    factory.make_memory(world.scribe, "shared scribe", store="shared")
    factory.make_queued_memory(world.copilot, "queued copilot")

    def texts(query=""):
        body = rita.get(f"/memories/{query}").content.decode()
        return {
            t for t in ("semantic copilot", "working copilot", "shared scribe", "queued copilot") if t in body
        }

    assert texts() == {"semantic copilot", "working copilot", "shared scribe", "queued copilot"}
    assert texts("?tier=working") == {"working copilot"}
    assert texts("?status=queued") == {"queued copilot"}
    assert texts("?store=shared") == {"shared scribe"}
    assert texts("?q=SHARED") == {"shared scribe"}
    rita.post("/owner", {"owner": "copilot"})
    assert texts() == {"semantic copilot", "working copilot", "queued copilot"}
    fragment = rita.get("/memories/?tier=working", **HX).content.decode()
    assert "<html" not in fragment and "working copilot" in fragment


def test_memories_list_paginates(rita, world):
    for i in range(55):
        factory.make_memory(world.copilot, f"fact number {i:02d}")
    first = rita.get("/memories/").content.decode()
    assert "page 1 of 2" in first and "fact number 54" in first and "fact number 00" not in first
    assert "fact number 00" in rita.get("/memories/?page=2").content.decode()


def test_the_detail_page_shows_text_versions_sources_chain_and_history(rita, world):
    v1 = factory.make_memory(
        world.copilot, "Alice likes barbecue", sources=[{"kind": "conversation", "ref": "7"}]
    )
    v2 = factory.make_queued_memory(world.copilot, "Alice is vegetarian", supersedes=v1)
    review.memory_edit_and_approve(
        actor=factory.SYSTEM, memory_id=v2.pk, text="Alice is vegetarian since 2026-10"
    )
    body = rita.get(f"/memories/{v2.pk}/").content.decode()
    assert "Alice is vegetarian since 2026-10" in body
    assert "Supersession chain" in body and f"#{v1.pk}" in body
    assert "v2" in body and "<ins> since 2026-10</ins>" in body
    assert "memory.approved" in body and "memory.written" in body
    old = rita.get(f"/memories/{v1.pk}/").content.decode()
    assert "conversation:7" in old and "superseded" in old and "memory.superseded" in old
    assert rita.get("/memories/999999/").status_code == 404


def test_pin_revoke_and_promote_from_the_detail_page(rita, world):
    memory = factory.make_memory(world.copilot, "gateway is vpn.example.com", tier="episodic", confidence=0.5)
    url = f"/memories/{memory.pk}"
    response = rita.post(f"{url}/pin", {"action": "pin"}, **HX)
    assert "<html" not in response.content.decode() and 'id="pinned-badge"' in response.content.decode()
    rita.post(f"{url}/promote", {"tier": "semantic", "confidence": "0.8"})
    memory.refresh_from_db()
    assert (memory.pinned, memory.tier, memory.confidence, memory.expires_at) == (True, "semantic", 0.8, None)
    response = rita.post(f"{url}/promote", {"tier": "working"}, follow=True)
    assert "not above" in response.content.decode()
    response = rita.post(f"{url}/revoke", {"reason": ""}, follow=True)
    assert "Say why the memory is revoked." in response.content.decode()
    rita.post(f"{url}/revoke", {"reason": "moved"})
    rita.post(f"{url}/pin", {"action": "unpin"})
    memory.refresh_from_db()
    assert (memory.status, memory.status_reason, memory.pinned) == (Memory.INVALIDATED, "moved", False)
    actions = list(AuditEvent.objects.filter(object_ids=[str(memory.pk)]).values_list("action", flat=True))
    assert {"memory.pinned", "memory.promoted", "memory.revoked", "memory.unpinned"} <= set(actions)


def test_console_pages_escape_memory_text(rita, world):
    evil = "<script>alert(1)</script>"
    memory = queued(world, evil, key="k<i>", value={"x": "<img src=x>"})
    for url in ("/review/", "/memories/", f"/memories/{memory.pk}/"):
        body = rita.get(url).content.decode()
        assert evil not in body and "<img src=x>" not in body and "k<i>" not in body, url
        assert "&lt;script&gt;" in body


def test_a_long_queue_shows_a_page_of_the_oldest_first(rita, world):
    memories = [queued(world, f"waiting {i}") for i in range(5)]
    body = rita.get("/review/?size=10&order=oldest").content.decode()
    assert "page 1 of 1 · 5 matches" in body
    body = rita.get("/review/?size=3").content.decode()  # not a page size: the default
    assert [f'id="memory-{m.pk}"' in body for m in memories] == [True] * 5
    memories += [queued(world, f"waiting {i}") for i in range(5, 12)]
    body = rita.get("/review/").content.decode()
    assert "page 1 of 2 · 12 matches" in body
    assert [f'id="memory-{m.pk}"' in body for m in memories] == [True] * 10 + [False] * 2


def test_a_reviewer_corrects_an_active_memory_with_a_reason(rita, world):
    memory = factory.make_memory(world.copilot, "Support hours end at 16:00.")
    response = rita.post(
        f"/memories/{memory.pk}/revise", {"text": "Support hours end at 18:00.", "reason": ""}, follow=True
    )
    assert "Say why the text changes." in response.content.decode()
    body = rita.post(
        f"/memories/{memory.pk}/revise", {"text": "Support hours end at 18:00.", "reason": "new hours"}, **HX
    ).content.decode()
    assert "Saved as a new version." in body and "<del>16</del><ins>18</ins>" in body
    memory.refresh_from_db()
    assert (memory.status, memory.version, memory.text) == (Memory.ACTIVE, 2, "Support hours end at 18:00.")
    assert AuditEvent.objects.get(action="memory.revised").reason == "new hours"


def test_strict_anti_drift_refusal_is_shown_on_the_card(rita, world):
    from knowledge.principals.services import setting_set

    factory.make_memory(
        world.copilot, "Acme prefers Slack", key="acme.channel", value="slack", confidence=0.95
    )
    memory = queued(world, "Acme prefers e-mail", key="acme.channel", value="email")
    setting_set(actor=factory.SYSTEM, name="BRAIN_STRICT_ANTI_DRIFT", value=True)
    body = rita.post(f"/review/{memory.pk}/approve", **HX).content.decode()
    assert 'role="alert"' in body and "Strict anti-drift" in body
    assert Memory.objects.get(pk=memory.pk).status == Memory.QUEUED


def test_the_badge_poll_answers_204_once_logged_out(client, world):
    queued(world)
    assert client.get("/review/count").status_code == 204
    client.force_login(world.reviewer)
    assert badge(client.get("/review/count").content) == "1"
