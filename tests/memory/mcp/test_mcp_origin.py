"""Brain's origin in the MCP resource metadata and the 401 challenge comes from configuration
(BRAIN_PUBLIC_URL), never from the request's Host header; the paths served beside Django are held
to ALLOWED_HOSTS as Django's own are; and no value can add a parameter to WWW-Authenticate."""

import asyncio
import concurrent.futures
import re

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from brainsite.asgi import build_application
from brainsite.settings import public_url
from memory.mcp import http as mcp_http

PUBLIC = "https://brain.example.com"
FORGED = "evil.example"
PATHS = ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp")


@pytest.fixture
def public(settings):
    settings.BRAIN_PUBLIC_URL = PUBLIC
    return settings


def _get(method: str, path: str, host: str, **kwargs) -> httpx.Response:
    async def main():
        transport = httpx.ASGITransport(app=build_application())
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.request(method, path, headers={"Host": host}, **kwargs)

    # A thread of its own: an earlier test on this worker may have left an event loop running
    # in the main thread (asyncio.run refuses to start inside one).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


PARAM = re.compile(r'\s*([A-Za-z_]+)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def _params(challenge: str) -> dict[str, str]:
    """The auth-params of one Bearer challenge, read as RFC 9110 quoted-strings; anything that
    is not one fails."""
    rest, params, at = challenge.removeprefix("Bearer "), {}, 0
    while at < len(rest):
        match = PARAM.match(rest, at)
        assert match, challenge
        params[match[1]] = re.sub(r"\\(.)", r"\1", match[2])
        at = match.end()
    return params


def test_a_forged_host_outside_allowed_hosts_gets_400_and_no_metadata(public):
    for path in (*PATHS, "/mcp/", "/.well-known/openid-configuration"):
        answer = _get("GET", path, FORGED)
        assert answer.status_code == 400, path
        assert "ALLOWED_HOSTS" in answer.json()["error"]
        assert FORGED not in answer.text


def test_under_a_wildcard_allowed_hosts_the_metadata_names_the_configured_origin(public):
    public.ALLOWED_HOSTS = ["*"]
    for path in PATHS:
        answer = _get("GET", path, FORGED)
        assert answer.status_code == 200
        body = answer.json()
        assert body["resource"] == f"{PUBLIC}/mcp/"
        assert body["resource_documentation"] == f"{PUBLIC}/api/docs/"
        assert FORGED not in answer.text
    # A Host with a quote is no host at all, even under `*` (Django's rule).
    assert _get("GET", PATHS[0], 'evil.example", x="y').status_code == 400


def test_the_401_challenge_names_the_configured_origin_whatever_the_host(public):
    public.ALLOWED_HOSTS = ["*"]
    answer = _get("POST", "/mcp/", FORGED, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer.status_code == 401
    assert _params(answer.headers["WWW-Authenticate"]) == {
        "realm": "brain",
        "error_description": "invalid or missing Brain agent token",
        "resource_metadata": f"{PUBLIC}/.well-known/oauth-protected-resource/mcp",
    }


def test_a_quote_in_a_challenge_value_cannot_add_a_parameter(public, monkeypatch):
    public.ALLOWED_HOSTS = ["*"]
    injected = 'evil.example", error="insufficient_scope'
    answer = _get("POST", "/mcp/", injected, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer.status_code == 400 and "WWW-Authenticate" not in answer.headers
    # And were a value ever to hold a quote, it stays inside its own quoted-string.
    monkeypatch.setattr(mcp_http, "_origin", lambda: 'https://x", error="insufficient_scope')
    params = _params(mcp_http._challenge(invalid=False))
    assert set(params) == {"realm", "error_description", "resource_metadata"}
    assert params["resource_metadata"].startswith('https://x", error="insufficient_scope')
    with_backslash = mcp_http._quoted('a\\", b="c\r\nX-Evil: 1')
    assert with_backslash == '"a\\\\\\", b=\\"cX-Evil: 1"'


def test_the_public_url_is_an_origin_from_configuration():
    assert public_url("https://brain.example.com/", allowed_hosts=[], behind_tls=False, port="8000") == PUBLIC
    # Unset: the first concrete ALLOWED_HOSTS entry, https behind the TLS proxy, else http on PORT.
    hosts = ["*", ".example.org", "brain.example.com", "localhost"]
    assert public_url("", allowed_hosts=hosts, behind_tls=True, port="8000") == PUBLIC
    assert (
        public_url("", allowed_hosts=hosts, behind_tls=False, port="8000") == "http://brain.example.com:8000"
    )
    for bad in ("brain.example.com", 'https://a"b', "https://x/mcp", "https://u@x", "ftp://x"):
        with pytest.raises(ImproperlyConfigured, match="BRAIN_PUBLIC_URL must be an origin"):
            public_url(bad, allowed_hosts=[], behind_tls=False, port="8000")
