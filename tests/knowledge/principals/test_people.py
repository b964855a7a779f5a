"""People and tokens pages: admins create people, change roles, deactivate; make and revoke agent
and integration tokens; everyone changes their own password. Every change is audited."""

from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from knowledge.models import ApiToken, AuditEvent, Integration


def _console(user):
    client = Client()
    client.force_login(user)
    return client


def _api(raw):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_an_admin_adds_a_reviewer_who_can_then_log_in(world):
    response = _console(world.admin).post(
        "/people/", {"username": "vera", "role": "reviewer", "password": "long-enough-1"}
    )
    assert response.status_code == 302
    vera = User.objects.get(username="vera")
    assert vera.groups.filter(name="reviewer").exists()
    assert AuditEvent.objects.filter(action="user.created", object_ids__contains=[str(vera.pk)]).count() == 1
    page = Client().post("/login/", {"username": "vera", "password": "long-enough-1"})
    assert page.status_code == 302 and "/login/" not in page["Location"]


def test_a_short_password_or_a_taken_name_writes_nothing(world):
    client = _console(world.admin)
    before = (User.objects.count(), AuditEvent.objects.count())
    short = client.post("/people/", {"username": "vera", "role": "reviewer", "password": "short"})
    assert short.status_code == 200 and "at least 8 characters" in short.content.decode()
    taken = client.post("/people/", {"username": "rita", "role": "reviewer", "password": "long-enough-1"})
    assert "already exists" in taken.content.decode()
    assert (User.objects.count(), AuditEvent.objects.count()) == before


def test_a_role_change_and_a_deactivation_are_audited_and_the_deactivated_token_stops(world):
    client = _console(world.admin)
    assert _api(world.tokens["reviewer"]).get("/api/me").status_code == 200
    client.post(f"/people/{world.reviewer.pk}/change", {"action": "role", "role": "admin"})
    world.reviewer.refresh_from_db()
    assert (
        world.reviewer.groups.filter(name="admin").exists()
        and not world.reviewer.groups.filter(name="reviewer").exists()
    )
    event = AuditEvent.objects.get(action="user.role_changed")
    assert event.data == {"before": "reviewer", "after": "admin"}

    client.post(f"/people/{world.reviewer.pk}/change", {"action": "deactivate"})
    world.reviewer.refresh_from_db()
    assert not world.reviewer.is_active
    assert AuditEvent.objects.filter(
        action="user.deactivated", object_ids__contains=[str(world.reviewer.pk)]
    ).exists()
    assert _api(world.tokens["reviewer"]).get("/api/me").status_code == 401
    client.post(f"/people/{world.reviewer.pk}/change", {"action": "activate"})
    world.reviewer.refresh_from_db()
    assert world.reviewer.is_active


def test_the_last_admin_can_neither_be_demoted_nor_deactivate_themself(world):
    client = _console(world.admin)
    response = client.post(
        f"/people/{world.admin.pk}/change", {"action": "role", "role": "reviewer"}, follow=True
    )
    assert "last admin" in response.content.decode()
    response = client.post(f"/people/{world.admin.pk}/change", {"action": "deactivate"}, follow=True)
    assert "cannot deactivate yourself" in response.content.decode()
    world.admin.refresh_from_db()
    assert world.admin.is_active and world.admin.groups.filter(name="admin").exists()
    assert not AuditEvent.objects.filter(action__in=["user.role_changed", "user.deactivated"]).exists()


def test_reviewers_cannot_open_people_or_tokens(world):
    client = _console(world.reviewer)
    assert client.get("/people/").status_code == 403
    assert client.get("/people/tokens/").status_code == 403
    assert client.post(f"/people/{world.admin.pk}/change", {"action": "deactivate"}).status_code == 403


def test_an_admin_makes_an_integration_token_that_works_and_revokes_it(world):
    client = _console(world.admin)
    response = client.post(
        "/people/tokens/", {"kind": "integration", "integration": "helpdesk", "label": "prod"}
    )
    assert response.status_code == 200
    raw = response.context["new_token"]
    assert raw.startswith("brn_")
    assert Integration.objects.filter(name="helpdesk").exists()
    me = _api(raw).get("/api/me")
    assert me.status_code == 200 and me.json()["kind"] == "integration" and me.json()["name"] == "helpdesk"

    page = client.get("/people/tokens/").content.decode()
    token = ApiToken.objects.get(integration__name="helpdesk")
    assert token.prefix in page and token.last_used_at is not None
    client.post(f"/people/tokens/{token.pk}/revoke")
    assert _api(raw).get("/api/me").status_code == 401
    actions = list(
        AuditEvent.objects.filter(object_type__in=["token", "integration"]).values_list("action", flat=True)
    )
    assert {"integration.created", "token.created", "token.revoked"} <= set(actions)


def test_an_agent_token_from_the_tokens_page_and_a_bad_request_writes_nothing(world):
    client = _console(world.admin)
    before = ApiToken.objects.count()
    bad = client.post("/people/tokens/", {"kind": "agent", "agent": ""})
    assert bad.status_code == 400 and "Choose the agent" in bad.content.decode()
    assert ApiToken.objects.count() == before
    ok = client.post("/people/tokens/", {"kind": "agent", "agent": "copilot"})
    assert _api(ok.context["new_token"]).get("/api/me").json()["name"] == "copilot"


def test_an_admin_makes_a_reviewers_token_shown_once_and_kept_as_a_hash(world):
    client = _console(world.admin)
    before = ApiToken.objects.count()
    bad = client.post("/people/tokens/", {"kind": "person", "person": ""})
    assert bad.status_code == 400 and "Choose the reviewer or admin" in bad.content.decode()
    nobody = client.post("/people/tokens/", {"kind": "person", "person": "no-such-user"})
    assert nobody.status_code == 400 and ApiToken.objects.count() == before
    page = client.get("/people/tokens/").content.decode()
    assert f'<option value="{world.reviewer.username}">' in page

    made = client.post(
        "/people/tokens/", {"kind": "person", "person": world.reviewer.username, "label": "script"}
    )
    assert made.status_code == 200
    raw = made.context["new_token"]
    assert raw in made.content.decode() and f"reviewer {world.reviewer.username}" in made.content.decode()
    token = ApiToken.objects.get(user=world.reviewer, label="script")
    assert (
        raw not in (token.key_hash, token.prefix) and token.key_hash != raw and raw.startswith(token.prefix)
    )
    assert raw not in client.get("/people/tokens/").content.decode()  # shown once
    me = _api(raw).get("/api/me").json()
    assert (me["kind"], me["name"], me["role"]) == ("person", world.reviewer.username, "reviewer")
    assert _api(raw).get("/api/memory?status=queued").status_code == 200  # a reviewer's API
    assert AuditEvent.objects.filter(action="token.created", object_ids=[str(token.pk)]).exists()
    # a deactivated person cannot be chosen
    world.reviewer.is_active = False
    world.reviewer.save(update_fields=["is_active"])
    gone = client.post("/people/tokens/", {"kind": "person", "person": world.reviewer.username})
    assert gone.status_code == 400 and ApiToken.objects.count() == before + 1


def test_a_person_changes_their_own_password(world):
    client = _console(world.reviewer)
    wrong = client.post(
        "/account/",
        {"old_password": "nope", "new_password1": "a-new-secret-9", "new_password2": "a-new-secret-9"},
    )
    assert wrong.status_code == 200 and "incorrect" in wrong.content.decode()
    ok = client.post(
        "/account/",
        {
            "old_password": "correct-horse-9",
            "new_password1": "a-new-secret-9",
            "new_password2": "a-new-secret-9",
        },
    )
    assert ok.status_code == 302
    assert client.get("/review/").status_code == 200  # still logged in
    world.reviewer.refresh_from_db()
    assert world.reviewer.check_password("a-new-secret-9")
    assert (
        AuditEvent.objects.filter(
            action="user.password_changed", object_ids__contains=[str(world.reviewer.pk)]
        ).count()
        == 1
    )
