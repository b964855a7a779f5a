from knowledge.models import ApiToken


def login(client, user):
    client.force_login(user)
    return client


def test_console_requires_login(client, world):
    response = client.get("/agents/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_reviewer_is_refused_admin_pages(client, world):
    login(client, world.reviewer)
    assert client.get("/agents/").status_code == 200
    assert client.get("/settings/").status_code == 403
    response = client.post(f"/agents/{world.copilot.name}/tokens", {"label": "x"})
    assert response.status_code == 403
    assert not ApiToken.objects.filter(label="x").exists()


def test_admin_creates_and_revokes_an_agent_token(client, world):
    login(client, world.admin)
    page = client.post(f"/agents/{world.copilot.name}/tokens", {"label": "ci"})
    assert page.status_code == 200
    raw = page.context["new_token"]
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/me").json()["name"] == "copilot"
    token = ApiToken.objects.get(label="ci")
    client.post(f"/agents/{world.copilot.name}/tokens/{token.pk}/revoke")
    assert api.get("/api/me").status_code == 401


def test_htmx_token_create_returns_only_the_fragment(client, world):
    login(client, world.admin)
    response = client.post(f"/agents/{world.copilot.name}/tokens", {"label": "h"}, HTTP_HX_REQUEST="true")
    assert b"<html" not in response.content
    assert b"New token" in response.content


def test_console_pages_escape_user_content(client, world):
    from knowledge.principals import services
    from tests.factory import SYSTEM

    services.agent_update(
        actor=SYSTEM, agent=world.copilot, trusted=False, instructions="<script>alert(1)</script>"
    )
    login(client, world.reviewer)
    body = client.get(f"/agents/{world.copilot.name}/").content
    assert b"<script>alert(1)</script>" not in body
    assert b"&lt;script&gt;" in body


def test_settings_change_is_audited(client, world):
    from knowledge.models import AuditEvent
    from knowledge.settings_store import setting_get

    login(client, world.admin)
    client.post("/settings/", {"name": "BRAIN_MEMORY_INVALIDATION", "value": "requeue"})
    assert setting_get("BRAIN_MEMORY_INVALIDATION") == "requeue"
    event = AuditEvent.objects.get(action="settings.changed")
    assert event.data == {"from": "flag", "to": "requeue"}
    client.post("/settings/", {"name": "BRAIN_MEMORY_INVALIDATION", "value": "bogus"})
    assert setting_get("BRAIN_MEMORY_INVALIDATION") == "requeue"


def test_a_deactivated_person_is_told_so_once_the_password_is_right(client, world):
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(pk=world.reviewer.pk).update(is_active=False)
    right = client.post("/login/", {"username": "rita", "password": "correct-horse-9"})
    assert right.status_code == 200 and "deactivated" in right.content.decode()
    assert "_auth_user_id" not in client.session
    wrong = client.post("/login/", {"username": "rita", "password": "wrong-horse-9"})
    assert "deactivated" not in wrong.content.decode()  # without the password, nothing is told
