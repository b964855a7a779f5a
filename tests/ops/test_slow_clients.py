"""Slow or idle clients must not starve everyone else: connections that never finish their
headers wait on the event loop, and bodies are read there in full before a request takes one
of Django's pool threads (brainsite/ops/asgi_body.py)."""

import socket

import httpx

from tests.ops.conftest import wait_for

HEADERS_ONLY = 40  # more than the web processes' threads (2 processes × 4)
SLOW_BODIES = 40


def _open(port: int, payload: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(payload)
    return sock


def test_slow_and_idle_clients_do_not_starve_the_others(brain):
    brain.wait_healthy()
    idle = [
        _open(brain.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        for _ in range(HEADERS_ONLY)
    ]
    slow_body = [
        _open(
            brain.port,
            b"POST /api/memory HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + brain.token.encode() + b'\r\nContent-Length: 400\r\n\r\n{"scope": ',
        )
        for _ in range(SLOW_BODIES)
    ]
    try:
        # Everyone else is still served, one request after another, while those connections hang.
        with httpx.Client(timeout=10) as client:
            for i in range(10):
                assert client.get(f"{brain.url}/healthz").status_code == 200
                written = brain.write(client, f"served beside slow clients #{i}")
                assert written.status_code == 201, written.text
        # A body that never arrives is answered 408 (BRAIN_BODY_TIMEOUT_SECONDS is 3 here) and
        # wrote nothing.
        slow_body[0].settimeout(30)
        answer = wait_for(
            lambda: slow_body[0].recv(4096), timeout=30, what="the 408 to a body that never came"
        )
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert brain.count("SELECT count(*) FROM knowledge_memory WHERE text LIKE 'served beside%%'") == 10
    finally:
        for sock in idle + slow_body:
            sock.close()


STALLED_UPLOADS = 24
PAST_THE_BODY_LIMIT = 5_300_000  # BRAIN_MAX_BODY_BYTES is 5 MB; uploads may be larger


def _stalled_upload(brain, i: int) -> socket.socket:
    """A material upload (multipart, valid token) that declares 8 MB and sends 5.3 MB of it:
    past the ordinary body limit, where the body reader used to hand the rest to a Django
    thread to wait for."""
    boundary = f"stall{i}"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="agent"\r\n\r\n{brain.agent}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="stalled-{i}.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    request = (
        f"POST /api/materials HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {brain.token}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {8 * 1024 * 1024}\r\n\r\n"
    ).encode()
    return _open(brain.port, request + head + b"x" * PAST_THE_BODY_LIMIT)


def test_stalled_uploads_get_408_and_do_not_take_the_web_tier_down(brain):
    brain.wait_healthy()
    stalled = [_stalled_upload(brain, i) for i in range(STALLED_UPLOADS)]
    try:
        with httpx.Client(timeout=1) as client:  # /healthz must answer within a second
            for _ in range(10):
                for sock in stalled:  # a byte now and then: stalled, but not yet past the timeout
                    sock.sendall(b"x")
                assert client.get(f"{brain.url}/healthz").status_code == 200
        # Then they stop for good: each is answered 408 once BRAIN_BODY_TIMEOUT_SECONDS (3 here)
        # pass without a byte, and nothing was stored.
        for sock in stalled:
            sock.settimeout(30)
            answer = wait_for(lambda s=sock: s.recv(4096), timeout=30, what="the 408 to a stalled upload")
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert (
            brain.count("SELECT count(*) FROM knowledge_materialversion WHERE filename LIKE 'stalled-%%'")
            == 0
        )
    finally:
        for sock in stalled:
            sock.close()
