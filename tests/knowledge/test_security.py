"""Login throttling, the API's bad-token throttle, security headers, TLS settings and redirects."""

import json
import os
import re
import subprocess
import sys

from django.test import override_settings
from rest_framework.test import APIClient

from knowledge.models import AuditEvent, AuthFailure

PASSWORD = "correct-horse-9"  # tests.factory.make_user's default


def _login(client, username, password):
    return client.post("/login/", {"username": username, "password": password})


# --- console logins ---------------------------------------------------------------------------


def test_repeated_failed_logins_lock_the_username_out_and_are_audited(client, world, settings):
    limit = settings.AXES_FAILURE_LIMIT
    for _ in range(limit - 1):
        assert _login(client, "rita", "hunter2-guess").status_code == 200  # the form again, with an error
    assert _login(client, "rita", "hunter2-guess").status_code == 429  # the last failure locks out
    locked = _login(client, "rita", PASSWORD)  # even the right password is refused now
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session
    failed = AuditEvent.objects.filter(action="auth.login_failed", actor_name="rita")
    assert failed.count() == limit - 1  # the last one is audited as the lockout
    assert all(e.object_ids == ["127.0.0.1"] for e in failed)
    assert AuditEvent.objects.filter(action="auth.locked_out", actor_name="rita").exists()
    assert "hunter2-guess" not in json.dumps(list(AuditEvent.objects.values("data", "reason")))
    # another username from the same address is not locked
    assert _login(client, "adam", PASSWORD).status_code == 302


def test_a_successful_login_resets_the_count(client, world, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, "rita", "hunter2-guess")
    assert _login(client, "rita", PASSWORD).status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, "rita", "hunter2-guess")
    assert _login(client, "rita", PASSWORD).status_code == 302


# --- API tokens -------------------------------------------------------------------------------


@override_settings(BRAIN_API_BAD_TOKENS_PER_MINUTE=5)
def test_a_burst_of_bad_tokens_gets_429_with_retry_after_and_good_tokens_still_work(world):
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Bearer brn_not-a-real-token")
    codes = [bad.get("/api/me").status_code for _ in range(7)]
    assert codes == [401] * 5 + [429] * 2
    refused = bad.get("/api/me")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "Too many bad tokens" in refused.json()["error"]
    # An agent behind the same address is not slowed by someone else's bad tokens.
    assert world.client("copilot").get("/api/me").status_code == 200
    # Another address has its own count.
    other = APIClient(REMOTE_ADDR="10.0.0.9")
    other.credentials(HTTP_AUTHORIZATION="Bearer brn_not-a-real-token")
    assert other.get("/api/me").status_code == 401
    assert AuthFailure.objects.get(address="10.0.0.9").count == 1


@override_settings(BRAIN_PROXY_HOPS=1, BRAIN_API_BAD_TOKENS_PER_MINUTE=1)
def test_behind_a_proxy_the_forwarded_address_is_counted_and_cannot_be_spoofed(world):
    client = APIClient(REMOTE_ADDR="10.0.0.1")
    client.credentials(HTTP_AUTHORIZATION="Bearer brn_bad")
    # The proxy appends the client's address; whatever the client put before it is ignored.
    client.get("/api/me", HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.7")
    client.get("/api/me", HTTP_X_FORWARDED_FOR="5.6.7.8, 203.0.113.7")
    assert AuthFailure.objects.get(address="203.0.113.7").count == 2
    assert not AuthFailure.objects.filter(address__in=["1.2.3.4", "5.6.7.8", "10.0.0.1"]).exists()


def test_without_proxies_x_forwarded_for_is_ignored_by_the_bad_token_count(world, settings):
    settings.BRAIN_API_BAD_TOKENS_PER_MINUTE = 3
    client = APIClient(REMOTE_ADDR="10.0.0.2")
    client.credentials(HTTP_AUTHORIZATION="Bearer brn_bad")
    codes = [client.get("/api/me", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}").status_code for i in range(5)]
    assert codes == [401] * 3 + [429] * 2
    assert list(AuthFailure.objects.values_list("address", flat=True)) == ["10.0.0.2"]


def test_a_client_request_id_is_kept_beside_brains_own_never_instead(world):
    """The id on the answer and on the audit event is Brain's; the one the client sent is kept as
    `client_request_id` (for the log line), cleaned of anything that could break a log line."""
    scribe = world.client("scribe")
    body = {
        "scope": "agent",
        "text": "Request ids are Brain's own.",
        "sources": [{"kind": "ticket", "ref": "T-1"}],
    }
    sent = "forged-id 200 1.0ms\nINFO brain.request [other]"
    written = scribe.post("/api/memory", body, format="json", HTTP_X_REQUEST_ID=sent)
    assert written.status_code == 201, written.json()
    own = written["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{32}", own)
    assert written.wsgi_request.client_request_id == "forged-id2001.0msINFObrain.requestother"
    assert AuditEvent.objects.filter(request_id=own).exists()
    assert not AuditEvent.objects.filter(request_id__startswith="forged").exists()


@override_settings(BRAIN_PROXY_HOPS=1)
def test_behind_a_proxy_its_request_id_is_brains(world):
    answer = world.client("scribe").get("/api/me", HTTP_X_REQUEST_ID="nginx-5f2c9a")
    assert answer["X-Request-Id"] == "nginx-5f2c9a" and answer.wsgi_request.client_request_id == ""


# --- headers ----------------------------------------------------------------------------------

INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\bsrc=)[^>]*>", re.I)
INLINE_HANDLER = re.compile(rb"<[^>]+\son[a-z]+\s*=", re.I)
INLINE_STYLE = re.compile(rb"<[^>]+\sstyle\s*=", re.I)


def test_console_pages_send_a_strict_csp_and_carry_no_inline_script_or_style(client, world):
    client.force_login(world.admin)
    for path in ["/", "/knowledge/entries/", "/review/", "/memories/", "/agents/", "/settings/", "/models/"]:
        response = client.get(path)
        assert response.status_code == 200, path
        csp = response["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        body = response.content
        assert not INLINE_SCRIPT.search(body), path
        assert not INLINE_HANDLER.search(body), path
        assert not INLINE_STYLE.search(body), path
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["X-Frame-Options"] == "DENY"
    login = client.get("/login/")
    assert "default-src 'self'" in login["Content-Security-Policy"]


def test_the_api_docs_page_loads_its_script_from_a_file(client, db):
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert not INLINE_SCRIPT.search(docs.content)
    csp = docs["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-eval" not in csp


def _settings_with(env: dict) -> dict:
    code = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({k: getattr(s, k, None) for k in ['SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', "
        "'SECURE_HSTS_SECONDS', 'SECURE_PROXY_SSL_HEADER', 'SECURE_SSL_REDIRECT', 'CSRF_TRUSTED_ORIGINS']}))"
    )
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "brainsite.settings",
        "BRAIN_EMBEDDED_DATABASE_URL": "postgresql://nobody@localhost:1/none",  # never connected
        **env,
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tls_settings_turn_on_secure_cookies_hsts_and_the_proxy_header():
    plain = _settings_with({})
    assert plain["SESSION_COOKIE_SECURE"] is False and plain["SECURE_HSTS_SECONDS"] in (0, None)
    tls = _settings_with(
        {
            "BRAIN_SECURE_COOKIES": "1",
            "BRAIN_TRUSTED_ORIGINS": "https://brain.example.com, https://b.example.com",
        }
    )
    assert tls["SESSION_COOKIE_SECURE"] is True and tls["CSRF_COOKIE_SECURE"] is True
    assert tls["SECURE_HSTS_SECONDS"] == 31_536_000
    assert tls["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert tls["SECURE_SSL_REDIRECT"] is True
    assert tls["CSRF_TRUSTED_ORIGINS"] == ["https://brain.example.com", "https://b.example.com"]


# --- redirects --------------------------------------------------------------------------------


def test_the_owner_selector_needs_a_reviewer_and_a_post(client, world):
    """Its guards decorate the view itself (they once decorated a helper, and anyone's GET
    answered 500 before any check)."""
    for method in ("get", "post"):
        response = getattr(client, method)("/owner", {"owner": "x"})
        assert response.status_code == 302 and "/login/" in response["Location"], method
    client.force_login(world.reviewer)
    assert client.get("/owner", {"owner": "copilot"}).status_code == 405
    assert client.post("/owner", {"owner": "ghost"}).status_code == 400
    assert "owner" not in client.session


def test_the_owner_selector_never_redirects_off_the_site(client, world):
    client.force_login(world.reviewer)
    for target in ["http://elsewhere/", "//elsewhere/x", "https://evil.example/", "javascript:alert(1)"]:
        response = client.post("/owner", {"owner": "copilot", "next": target})
        assert response.status_code == 302
        assert response["Location"] == "/", target
    assert client.post("/owner", {"owner": "", "next": "/memories/?tier=semantic"})["Location"] == (
        "/memories/?tier=semantic"
    )
