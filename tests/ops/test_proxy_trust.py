"""Client address and request id are believed only from configured proxies (BRAIN_PROXY_HOPS,
0 here), through the real web server: uvicorn once took X-Forwarded-For from any client on
loopback as the client's address, so rotating it talked around the login lockout and the
bad-token throttle. And a client's X-Request-Id is logged beside Brain's own id, never instead,
so it cannot forge log lines."""

import re
import uuid

import httpx

from tests.ops.conftest import wait_for


def _forwarded(i: int) -> dict:
    return {"X-Forwarded-For": f"198.51.100.{i % 250 + 1}"}


def test_rotating_x_forwarded_for_does_not_escape_the_login_lockout(brain):
    brain.wait_healthy()
    username = f"nobody-{uuid.uuid4().hex[:8]}"
    statuses = []
    with httpx.Client(timeout=15) as client:
        for i in range(12):
            form = client.get(f"{brain.url}/login/", headers=_forwarded(i))
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)[1]
            answer = client.post(
                f"{brain.url}/login/",
                data={"username": username, "password": f"guess-{i}", "csrfmiddlewaretoken": token},
                headers={**_forwarded(i), "Referer": f"{brain.url}/login/"},
            )
            statuses.append(answer.status_code)
    # BRAIN_LOGIN_FAILURE_LIMIT is 5: the fifth failure locks the (username, address) pair out.
    assert statuses[:4] == [200] * 4 and set(statuses[5:]) == {429}, statuses


def test_rotating_x_forwarded_for_does_not_escape_the_bad_token_throttle(brain):
    brain.wait_healthy()
    with httpx.Client(timeout=15) as client:
        statuses = [
            client.get(
                f"{brain.url}/api/me", headers={"Authorization": f"Bearer nope-{i}", **_forwarded(i)}
            ).status_code
            for i in range(30)
        ]
        # A valid token from the same address is never slowed.
        assert client.get(f"{brain.url}/api/me", headers=brain.headers()).status_code == 200
    # BRAIN_API_BAD_TOKENS_PER_MINUTE is 20: whatever the header says, it is one address, whose
    # count runs out within 30 (with rotating addresses believed, each was one failure: no 429).
    assert 429 in statuses and set(statuses) <= {401, 429}, statuses


def test_a_client_request_id_is_logged_beside_brains_own_never_instead(brain):
    brain.wait_healthy()
    start = len(brain.log_text())
    sent = f"client-{uuid.uuid4().hex[:10]}"
    forged = f"{sent} 200 0.1ms\n2026-01-01T00:00:00.000Z INFO brain.request [admin] GET /x"
    with httpx.Client(timeout=10) as client:
        plain = client.get(f"{brain.url}/healthz", headers={"X-Request-Id": sent})
        assert plain.headers["X-Request-Id"] != sent and re.fullmatch(
            r"[0-9a-f]{32}", plain.headers["X-Request-Id"]
        )
        tricky = client.get(
            f"{brain.url}/api/me", headers=brain.headers(**{"X-Request-Id": forged.replace("\n", " ")})
        )
        assert tricky.headers["X-Request-Id"] != forged
    own, other = plain.headers["X-Request-Id"], tricky.headers["X-Request-Id"]

    def lines():
        tail = brain.log_text()[start:]
        return tail if own in tail and other in tail else None

    tail = wait_for(lines, timeout=30, what="the request lines")
    assert re.search(rf"\[{own}\] GET /healthz 200 \d+\.\dms client_request_id={sent}$", tail, re.M), tail
    line = next(x for x in tail.splitlines() if f"[{other}]" in x)
    # The sent id lost its spaces: it cannot pose as a status, a duration or another line.
    assert line.endswith(
        " client_request_id=" + re.sub(r"[^A-Za-z0-9._:-]", "", forged.replace("\n", " "))[:64]
    )
    assert f"[{sent}]" not in tail and "[admin]" not in tail
