"""Operators' log lines: timestamp and request id on every line, one line per request with status
and duration, and no traceback for a client error."""

import re
import uuid

import httpx

from tests.ops.conftest import wait_for


def test_one_line_per_request_with_timestamp_and_request_id(brain):
    brain.wait_healthy()
    start = len(brain.log_text())
    rid = f"ops-log-{uuid.uuid4().hex[:12]}"
    with httpx.Client(timeout=10) as client:
        missing = client.get(
            f"{brain.url}/api/memory/987654321", headers=brain.headers(**{"X-Request-Id": rid})
        )
        assert missing.status_code == 404 and missing.headers["X-Request-Id"] == rid
        page = client.get(f"{brain.url}/no-such-page", headers={"X-Request-Id": rid + "-page"})
        assert page.status_code == 404
        fresh = client.get(f"{brain.url}/healthz")
    line = re.compile(
        r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO brain\.request \[(?P<rid>[\w-]+)\] "
        r"(?P<method>[A-Z]+) (?P<path>\S+) (?P<status>\d{3}) \d+\.\dms$",
        re.M,
    )

    def lines():
        found = {m["rid"]: m for m in line.finditer(brain.log_text()[start:])}
        return found if {rid, rid + "-page", fresh.headers["X-Request-Id"]} <= found.keys() else None

    found = wait_for(lines, timeout=30, what="the request lines")
    assert (found[rid]["method"], found[rid]["path"], found[rid]["status"]) == (
        "GET",
        "/api/memory/987654321",
        "404",
    )
    assert found[rid + "-page"]["status"] == "404"
    assert found[fresh.headers["X-Request-Id"]]["status"] == "200"
    tail = brain.log_text()[start:]
    assert "Traceback" not in tail
    assert "Not Found:" not in tail  # django.request's own line for a 404 is dropped
    assert len([m for m in line.finditer(tail) if m["rid"] == rid]) == 1
