"""Query terms: a term nobody has written yet is dropped from a search, but once a message brings
it, the next search finds it (no stale count stands in the way)."""

from tests import factory


def search(client, conv, q):
    response = client.post(
        "/api/memory/search", {"agent": "copilot", "conversation": conv.pk, "q": q}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_term_searched_before_it_existed_is_found_as_soon_as_it_arrives(world):
    conv = factory.make_conversation(world.copilot, world.general)
    client = world.client("copilot")
    factory.post_messages(
        world.general, [{"speaker": "bob", "text": "Printer on floor three is out of toner"}]
    )
    assert search(client, conv, "error ZQX-9931")["results"] == []
    (message_id,) = factory.post_messages(
        world.general, [{"speaker": "alice", "text": "The gateway logs error ZQX-9931 on every retry"}]
    )
    results = search(client, conv, "error ZQX-9931")["results"]
    assert results and results[0]["id"] == message_id
    assert "keyword_messages" in results[0]["routes"]
