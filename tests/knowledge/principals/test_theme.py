"""The console's colour theme (issue 53): each user's own choice, kept for them in every browser
they sign in from, audited; a value that is not a theme changes nothing."""

from django.test import Client

from knowledge.models import AuditEvent, ConsolePreferences


def _console(user, **kwargs):
    client = Client(**kwargs)
    client.force_login(user)
    return client


def _html_tag(client) -> str:
    return client.get("/review/").content.decode().split(">", 2)[1]


def test_a_user_chooses_dark_and_every_session_of_theirs_shows_it_and_no_one_elses(world):
    rita = _console(world.reviewer)
    assert "data-theme" not in _html_tag(rita)  # auto: the system decides
    answer = rita.post("/account/theme", {"theme": "dark", "next": "/review/?q=vpn"})
    assert answer.status_code == 302 and answer["Location"] == "/review/?q=vpn"
    assert 'data-theme="dark"' in _html_tag(rita)
    assert '<meta name="color-scheme" content="dark">' in rita.get("/review/").content.decode()
    assert 'data-theme="dark"' in _html_tag(_console(world.reviewer))  # another browser
    assert "data-theme" not in _html_tag(_console(world.admin))
    rita.post("/account/theme", {"theme": "light"})
    assert 'data-theme="light"' in _html_tag(rita)
    events = AuditEvent.objects.filter(action="user.theme_changed").order_by("id")
    assert [(e.data["before"], e.data["after"]) for e in events] == [("auto", "dark"), ("dark", "light")]


def test_a_value_that_is_not_a_theme_is_refused_and_writes_nothing(world):
    rita = _console(world.reviewer)
    answer = rita.post("/account/theme", {"theme": "<b>neon</b>"})
    assert answer.status_code == 400
    assert (
        "Choose one of auto, light, dark." in answer.content.decode()
        and "<b>neon" not in answer.content.decode()
    )
    assert not ConsolePreferences.objects.exists() and not AuditEvent.objects.filter(
        action="user.theme_changed"
    )
    assert rita.get("/account/theme").status_code == 405


def test_the_theme_form_needs_csrf_and_a_signed_in_user(world):
    strict = _console(world.reviewer, enforce_csrf_checks=True)
    assert strict.post("/account/theme", {"theme": "dark"}).status_code == 403
    anonymous = Client().post("/account/theme", {"theme": "dark"})
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert not ConsolePreferences.objects.exists()
