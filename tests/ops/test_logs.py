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
        assert missing.status_code == 404
        page = client.get(f"{brain.url}/no-such-page", headers={"X-Request-Id": rid + "-page"})
        assert page.status_code == 404
        fresh = client.get(f"{brain.url}/healthz")
        mcp = client.post(
            f"{brain.url}/mcp/",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers=brain.headers(
                **{"Accept": "application/json, text/event-stream", "X-Request-Id": rid + "-mcp"}
            ),
        )
    # Brain's own id on every line; the one the client sent beside it (tests/ops/test_proxy_trust.py).
    ids = [r.headers["X-Request-Id"] for r in (missing, page, fresh)]
    assert rid not in ids and len(set(ids)) == 3
    line = re.compile(
        r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO brain\.request \[(?P<rid>[\w-]+)\] "
        r"(?P<method>[A-Z]+) (?P<path>\S+) (?P<status>\d{3}) \d+\.\dms(?: client_request_id=(?P<sent>\S+))?$",
        re.M,
    )

    def lines():
        found = {m["rid"]: m for m in line.finditer(brain.log_text()[start:])}
        return found if set(ids) <= found.keys() else None

    found = wait_for(lines, timeout=30, what="the request lines")
    assert (
        found[ids[0]]["method"],
        found[ids[0]]["path"],
        found[ids[0]]["status"],
        found[ids[0]]["sent"],
    ) == (
        "GET",
        "/api/memory/987654321",
        "404",
        rid,
    )
    assert (found[ids[1]]["status"], found[ids[1]]["sent"]) == ("404", rid + "-page")
    assert (found[ids[2]]["status"], found[ids[2]]["sent"]) == ("200", None)
    # MCP is served beside Django, not by it, and has its line too.
    mcp_id = mcp.headers["X-Request-Id"]
    mcp_line = wait_for(lambda: lines() and lines().get(mcp_id), timeout=30, what="the MCP request line")
    assert (mcp_line["method"], mcp_line["path"], mcp_line["status"], mcp_line["sent"]) == (
        "POST",
        "/mcp/",
        str(mcp.status_code),
        rid + "-mcp",
    )
    tail = brain.log_text()[start:]
    assert "Traceback" not in tail
    assert "Not Found:" not in tail  # django.request's own line for a 404 is dropped
    assert len([m for m in line.finditer(tail) if m["rid"] == ids[0]]) == 1
