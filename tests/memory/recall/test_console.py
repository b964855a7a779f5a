"""The recall playground, memory_browse pages and the memo editor in the console."""

from knowledge.models import PinnedMemo
from tests import factory


def login(client, user):
    client.force_login(user)
    return client


def test_the_playground_shows_each_route_rank_and_the_budget(client, world):
    conv = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(
        world.general, [{"speaker": "alice", "text": "Error E4012 on the <b>VPN</b>", "external_id": "x-1"}]
    )
    factory.embed_all()
    login(client, world.reviewer)
    page = client.get(
        "/recall/", {"agent": "copilot", "conversation": conv.pk, "q": "E4012", "budget_tokens": 100}
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert "keyword_messages" in html and 'id="recall-results"' in html
    assert "&lt;b&gt;VPN&lt;/b&gt;" in html and "<b>VPN</b>" not in html
    outcome = page.context["outcome"]
    assert outcome["results"][0]["routes"]["keyword_messages"]["rank"] == 1
    assert outcome["used_tokens"] <= 100
    assert f"/recall/browse/message/{outcome['results'][0]['id']}?conversation={conv.pk}" in html
    fragment = client.get(
        "/recall/", {"agent": "copilot", "channel": "general", "q": "E4012"}, HTTP_HX_REQUEST="true"
    )
    assert b"<html" not in fragment.content and b"recall-results" in fragment.content


def test_the_playground_explains_bad_input(client, world):
    login(client, world.reviewer)
    page = client.get("/recall/", {"agent": "copilot", "q": "x"})
    assert "Give a conversation or a channel" in page.content.decode()


def test_browse_pages_open_the_source_behind_a_result(client, world):
    ids = factory.post_messages(
        world.general,
        [{"speaker": "alice", "text": f"line {i}", "thread": "t", "external_id": f"t-{i}"} for i in range(3)],
    )
    login(client, world.reviewer)
    page = client.get(f"/recall/browse/message/{ids[1]}")
    assert page.status_code == 200
    assert all(f"t-{i}" in page.content.decode() for i in range(3))
    assert client.get("/recall/browse/message/999999").status_code == 404
    client.logout()
    assert client.get(f"/recall/browse/message/{ids[1]}").status_code == 302


def test_admins_edit_the_memo_reviewers_only_read_it(client, world):
    login(client, world.reviewer)
    assert client.get(f"/agents/{world.copilot.name}/memo").status_code == 200
    assert client.post(f"/agents/{world.copilot.name}/memo", {"text": "x", "version": 0}).status_code == 403
    client.logout()
    login(client, world.admin)
    preview = client.post(f"/agents/{world.copilot.name}/memo", {"text": "Be brief.", "preview": "1"})
    assert b"4 / 300 tokens" in preview.content and not PinnedMemo.objects.exists()
    saved = client.post(
        f"/agents/{world.copilot.name}/memo", {"text": "Be brief.", "version": 0}, follow=True
    )
    assert b"Pinned memo saved" in saved.content
    assert PinnedMemo.objects.get(agent=world.copilot).text == "Be brief."
    over = client.post(
        f"/agents/{world.copilot.name}/memo", {"text": "word " * 400, "version": 1}, follow=True
    )
    assert b"its budget is 300" in over.content
    assert PinnedMemo.objects.get(agent=world.copilot).version == 1


def test_the_playground_replays_a_past_moment(client, world):
    conv = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(world.general, [{"speaker": "alice", "text": "Error E4012 again"}])
    login(client, world.reviewer)
    page = client.get(
        "/recall/", {"agent": "copilot", "conversation": conv.pk, "q": "E4012", "now": "2020-01-01T12:00"}
    )
    assert page.context["outcome"]["results"] == []
    bad = client.get("/recall/", {"agent": "copilot", "conversation": conv.pk, "q": "E4012", "now": "soon"})
    assert "ISO time" in bad.content.decode()


def test_every_browse_kind_answers_200_with_its_page(client, world):
    from datetime import timedelta

    from django.utils import timezone

    from knowledge.models import Episode

    conv = factory.make_conversation(world.copilot, world.general)
    ids = factory.post_messages(
        world.general,
        [{"speaker": "alice", "text": f"line {i}", "thread": "t", "external_id": f"t-{i}"} for i in range(3)],
    )
    entry = factory.make_entry(world.copilot, name="VPN client", blocks=["Use client 5.2.1"])
    memory = factory.make_memory(
        world.copilot,
        "VPN-4012 is fixed by 5.2.1",
        store="shared",
        sources=[{"kind": "message", "ref": str(ids[1])}],
    )
    now = timezone.now()
    episode = Episode.objects.create(
        channel=world.general,
        store="shared",
        topic="VPN",
        summary="s",
        start_ts=now - timedelta(hours=1),
        end_ts=now,
    )
    login(client, world.reviewer)
    pages = {
        "memory": memory.pk,
        "entry": entry.pk,
        "conversation": conv.pk,
        "message": ids[1],
        "episode": episode.pk,
        "thread": ids[1],
    }
    for kind, pk in pages.items():
        page = client.get(f"/recall/browse/{kind}/{pk}")
        assert page.status_code == 200, (kind, page.status_code)
        assert f"<h1>{kind.capitalize()} " in page.content.decode(), kind
    message_page = client.get(f"/recall/browse/message/{ids[1]}").content.decode()
    assert 'class="hit" aria-current="true"' in message_page


def test_the_500_page_has_the_site_shell(rf, client, world):
    from brainsite.ops.errors import server_error

    login(client, world.reviewer)
    request = rf.get("/somewhere")
    request.user, request.session = world.reviewer, client.session
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        response = server_error(request)
    assert response.status_code == 500
    body = response.content.decode()
    assert 'class="topbar"' in body and "Something went wrong" in body
