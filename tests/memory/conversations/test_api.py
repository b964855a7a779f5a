"""Channels, message ingestion and conversations through the API."""

from knowledge.models import AuditEvent, Channel, Conversation, Message, Person
from tests import factory


def test_admin_and_integration_create_channels_agents_and_reviewers_cannot(world):
    body = {"name": "ops", "kind": "shared", "memory_scope": "channel"}
    assert world.client("copilot").post("/api/channels", body, format="json").status_code == 403
    assert world.client("reviewer").post("/api/channels", body, format="json").status_code == 403
    assert not Channel.objects.filter(name="ops").exists()

    response = world.client("admin").post("/api/channels", body, format="json")
    assert response.status_code == 201
    assert response.json()["memory_scope"] == "channel"

    response = world.client("integration").post("/api/channels", {"name": "tickets-feed"}, format="json")
    assert response.status_code == 201
    assert response.json()["integrations"] == ["tickets"]


def test_a_dm_channel_needs_a_person_and_unknown_people_are_created(world):
    client = world.client("admin")
    response = client.post("/api/channels", {"name": "dm-x", "kind": "dm"}, format="json")
    assert response.status_code == 400
    assert "person" in response.json()["fields"]
    response = client.post(
        "/api/channels", {"name": "dm-zoe", "kind": "dm", "person": "zoe", "agent": "copilot"}, format="json"
    )
    assert response.status_code == 201
    assert Person.objects.filter(name="zoe").exists()
    assert client.post("/api/channels", {"name": "dm-zoe"}, format="json").status_code == 400


def test_the_same_external_id_is_stored_once(world):
    factory.make_conversation(world.copilot, world.general)
    client = world.client("copilot")
    body = {"channel": "general", "speaker": "alice", "text": "VPN is down again", "external_id": "slack-1"}
    first = client.post("/api/messages", body, format="json")
    second = client.post("/api/messages", body, format="json")
    assert first.status_code == 201 and first.json()["duplicate"] is False
    assert second.status_code == 200 and second.json()["duplicate"] is True
    assert second.json()["id"] == first.json()["id"]
    assert Message.objects.filter(external_id="slack-1").count() == 1


def test_a_batch_is_stored_in_one_call_and_repeats_inside_it_count_once(world):
    factory.make_conversation(world.copilot, world.general)
    rows = [
        {"channel": "general", "speaker": "alice", "text": f"message {i}", "external_id": f"b-{i % 3}"}
        for i in range(5)
    ] + [{"channel": "general", "speaker": "copilot", "text": "no id, always stored"}]
    response = world.client("copilot").post("/api/messages", {"messages": rows}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert (body["received"], body["stored"], body["duplicates"]) == (6, 4, 2)
    assert body["messages"][3]["duplicate"] and body["messages"][3]["id"] == body["messages"][0]["id"]
    assert Message.objects.count() == 4
    agent_message = Message.objects.get(text="no id, always stored")
    assert agent_message.speaker_agent == world.copilot and agent_message.speaker_person is None
    event = AuditEvent.objects.get(action="messages.ingested")
    assert event.counts == {"received": 6, "stored": 4, "duplicates": 2}
    assert "message 0" not in str(event.data) + str(event.reason)


def test_unknown_speakers_become_people_and_the_message_keeps_the_channel_store(world):
    factory.make_conversation(world.copilot, world.support)
    response = world.client("copilot").post(
        "/api/messages", {"channel": "support", "speaker": "newcomer", "text": "hello"}, format="json"
    )
    assert response.status_code == 201
    message = Message.objects.get(pk=response.json()["id"])
    assert message.speaker_person.name == "newcomer"
    assert message.store == "channel:support"


def test_posting_needs_a_part_in_the_channel(world):
    body = {"channel": "general", "speaker": "alice", "text": "hi"}
    assert world.client("copilot").post("/api/messages", body, format="json").status_code == 403
    assert world.client("integration").post("/api/messages", body, format="json").status_code == 403
    assert world.client("reviewer").post("/api/messages", body, format="json").status_code == 403
    assert Message.objects.count() == 0
    factory.make_conversation(world.copilot, world.general)
    assert world.client("copilot").post("/api/messages", body, format="json").status_code == 201
    assert world.client("admin").post("/api/messages", body, format="json").status_code == 201


def test_bad_messages_are_refused_whole_with_field_messages(world):
    factory.make_conversation(world.copilot, world.general)
    client = world.client("copilot")
    rows = [
        {"channel": "general", "speaker": "alice", "text": "fine"},
        {"channel": "general", "speaker": "person:", "text": ""},
    ]
    response = client.post("/api/messages", {"messages": rows}, format="json")
    assert response.status_code == 400
    errors = response.json()["fields"]["messages"]
    assert list(errors) == ["1"] and set(errors["1"]) == {"speaker", "text"}
    assert "needs a name" in errors["1"]["speaker"][0]
    response = client.post(
        "/api/messages", {"channel": "nowhere", "speaker": "a", "text": "x"}, format="json"
    )
    assert response.status_code == 400
    too_many = [{"channel": "general", "speaker": "a", "text": "x"}] * 1001
    assert client.post("/api/messages", {"messages": too_many}, format="json").status_code == 400
    response = client.post(
        "/api/messages", {"channel": "general", "speaker": "a", "text": "x", "ts": "yesterday"}, format="json"
    )
    assert response.status_code == 400
    response = client.post(
        "/api/messages", {"channel": "general", "speaker": "a", "text": 404}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["fields"]["text"] == ["Must be a string, not int."]
    assert Message.objects.count() == 0


def test_a_conversation_is_opened_with_its_fixed_scope_and_finished_once(world):
    client = world.client("copilot")
    response = client.post("/api/conversations", {"agent": "copilot", "channel": "dm-alice"}, format="json")
    assert response.status_code == 201
    conv = response.json()
    assert conv["read_stores"] == ["shared", "self", "private:alice"]
    assert conv["write_store"] == "private:alice"
    assert (
        client.post(
            "/api/conversations", {"agent": "scribe", "channel": "general"}, format="json"
        ).status_code
        == 403
    )

    assert client.post(f"/api/conversations/{conv['id']}/finish").status_code == 200
    again = client.post(f"/api/conversations/{conv['id']}/finish")
    assert again.status_code == 409
    assert Conversation.objects.get(pk=conv["id"]).status == "finished"
    assert world.client("scribe").post(f"/api/conversations/{conv['id']}/finish").status_code == 403
    assert client.post("/api/conversations/999999/finish").status_code == 404


def test_a_changed_routing_rule_applies_to_the_next_conversation_only(world):
    client = world.client("copilot")
    first = client.post(
        "/api/conversations", {"agent": "copilot", "channel": "general"}, format="json"
    ).json()
    Channel.objects.filter(pk=world.general.pk).update(memory_scope="channel")
    second = client.post(
        "/api/conversations", {"agent": "copilot", "channel": "general"}, format="json"
    ).json()
    assert first["write_store"] == "shared"
    assert second["write_store"] == "channel:general"
    assert client.get(f"/api/conversations/{first['id']}").json()["write_store"] == "shared"
