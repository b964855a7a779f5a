import pytest
from django.core.management import call_command

from knowledge.models import ApiToken


def test_me_answers_for_each_kind_of_token(world):
    assert world.client("copilot").get("/api/me").json() == {"kind": "agent", "name": "copilot", "role": None}
    assert world.client("reviewer").get("/api/me").json() == {
        "kind": "person",
        "name": "rita",
        "role": "reviewer",
    }
    assert world.client("admin").get("/api/me").json() == {"kind": "person", "name": "adam", "role": "admin"}
    assert world.client("integration").get("/api/me").json() == {
        "kind": "integration",
        "name": "tickets",
        "role": None,
    }


@pytest.mark.parametrize("header", [None, "Bearer nope", "Token abc", "Bearer"])
def test_missing_or_bad_tokens_get_401_json(world, header):
    from rest_framework.test import APIClient

    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/me")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert "error" in response.json()


def test_revoked_token_stops_working_and_last_used_is_recorded(world):
    client = world.client("copilot")
    assert client.get("/api/me").status_code == 200
    token = ApiToken.objects.get(agent=world.copilot)
    assert token.last_used_at is not None
    from knowledge.principals import services
    from tests.factory import SYSTEM

    services.token_revoke(actor=SYSTEM, token_id=token.pk)
    assert client.get("/api/me").status_code == 401


def test_tokens_are_stored_hashed(world):
    raw = world.tokens["copilot"]
    assert not ApiToken.objects.filter(key_hash=raw).exists()
    assert not ApiToken.objects.filter(prefix=raw).exists()


def _last_line(capsys):
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_management_commands_print_working_tokens_last(db, capsys, monkeypatch):
    from rest_framework.test import APIClient

    call_command("createagent", "helper", "--trusted")
    agent_token = _last_line(capsys)
    call_command("createintegration", "crm")
    integration_token = _last_line(capsys)
    monkeypatch.setenv("BRAIN_PASSWORD", "s3cret-password")
    call_command("createconsoleuser", "rev", "--role", "reviewer")
    person_token = _last_line(capsys)
    for raw, expected in [
        (agent_token, {"kind": "agent", "name": "helper", "role": None}),
        (integration_token, {"kind": "integration", "name": "crm", "role": None}),
        (person_token, {"kind": "person", "name": "rev", "role": "reviewer"}),
    ]:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert client.get("/api/me").json() == expected
    from django.contrib.auth import authenticate
    from django.test import RequestFactory

    login = RequestFactory().post("/login/")  # login throttling needs the request
    assert authenticate(login, username="rev", password="s3cret-password") is not None


def test_schema_and_docs_are_served_without_a_cdn(client, db):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/me" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower()
