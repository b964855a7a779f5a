from knowledge.models import Message


def test_a_speaker_name_longer_than_a_name_can_be_is_refused(world):
    client = world.client("admin")
    for speaker in ("a" * 65, "person:" + "a" * 65):
        body = {"channel": "general", "speaker": speaker, "text": "hello"}
        response = client.post("/api/messages", body, format="json")
        assert response.status_code == 400, speaker
        assert "speaker" in response.json()["fields"]
    assert not Message.objects.exists()
    body = {"channel": "general", "speaker": "person:" + "a" * 64, "text": "hello"}
    assert client.post("/api/messages", body, format="json").status_code == 201
