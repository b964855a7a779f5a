"""Every GET endpoint of the API, walked with extreme paging, cursor and id values: each answer
is a 2xx or 4xx JSON body, never a 500 (a 20-digit `page` once reached PostgreSQL as a bigint
out of range, an out-of-range cursor as an xid8 out of range). The endpoints come from the
generated OpenAPI schema, so a list endpoint added later is walked too."""

import re

import pytest

from tests.openapi import api_spec

HUGE = "9" * 20
INTEGERS = [HUGE, "-" + HUGE, "0", "-1", "18446744073709551616", "1e9", "abc", ""]
CURSORS = [f"{HUGE}-1", f"1-{HUGE}", f"{HUGE}-{HUGE}", "18446744073709551615-0", "-1-0", "x"]


def _get_operations():
    for path, operations in sorted(api_spec()["paths"].items()):
        operation = operations.get("get")
        if operation is not None:
            yield path, operation


def _cases():
    """(path template, path values, query) for each extreme value of each parameter."""
    for path, op in _get_operations():
        params = op.get("parameters", [])
        in_path = {p["name"]: p.get("schema", {}).get("type") for p in params if p["in"] == "path"}
        base = {name: ("1" if kind == "integer" else "copilot") for name, kind in in_path.items()}
        for name, kind in in_path.items():
            if kind == "integer":
                yield path, {**base, name: HUGE}, {}
        for p in params:
            if p["in"] != "query":
                continue
            kind = p.get("schema", {}).get("type")
            if kind == "integer":
                for value in INTEGERS:
                    yield path, base, {p["name"]: value}
            elif p["name"] in ("after", "cursor", "before"):
                for value in CURSORS:
                    yield path, base, {p["name"]: value}


def _url(path: str, values: dict) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m[1]], path)


def test_the_walk_covers_the_list_endpoints():
    paths = {path for path, _, _ in _cases()}
    for listed in ("/api/memory", "/api/entries", "/api/audit", "/api/events", "/api/memory-gate/checks"):
        assert listed in paths


@pytest.mark.parametrize("who", ["admin", "copilot"])
def test_every_get_endpoint_answers_extreme_values_with_json(transactional_db, world, who):
    # transactional_db: each request commits or fails on its own, as on a real server
    client = world.client(who)
    client.raise_request_exception = False  # a server error is a finding here, collected below
    failures = []
    for path, values, query in _cases():
        response = client.get(_url(path, values), query)
        is_json = response.get("Content-Type", "").startswith("application/json")
        if response.status_code >= 500 or not (200 <= response.status_code < 500) or not is_json:
            if response.status_code in (200, 302) and not is_json and path.endswith("/original"):
                continue  # a download answers the file itself
            failures.append((path, values, query, response.status_code, response.content[:100]))
    assert not failures, "\n".join(map(str, failures))
