"""Bad input, everywhere one JSON shape: oversize bodies (413), JSON nested too deep, oversize
JSON values, unknown fields on every write endpoint — each answered with a clear JSON error,
and nothing written."""

import json

import pytest
from django.test import override_settings

from knowledge.models import AuditEvent, Entry, Memory, Message
from tests import factory


def _raw(client, method, path, body: bytes):
    return getattr(client, method)(path, body, content_type="application/json")


def _writes():
    return (
        Memory.objects.count(),
        Message.objects.count(),
        Entry.objects.count(),
        AuditEvent.objects.count(),
    )


# --- body size --------------------------------------------------------------------------------


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
def test_a_body_over_the_limit_is_413_json_naming_the_limit(world, client):
    before = _writes()
    body = json.dumps({"scope": "agent", "text": "x" * 20_000}).encode()
    response = _raw(world.client("copilot"), "post", "/api/memory", body)
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    payload = response.json()
    assert payload["max_body_bytes"] == 10_000 and "10,000" in payload["error"]
    assert _writes() == before
    # the console answers 413 too
    client.force_login(world.admin)
    page = client.post("/knowledge/entries/new", {"name": "x" * 20_000})
    assert page.status_code == 413 and b"10,000" in page.content
    assert _writes() == before


@pytest.mark.parametrize("depth", [40, 5_000])
def test_json_nested_too_deep_is_400_not_500(world, depth):
    before = _writes()
    nested = "[" * depth + "]" * depth
    body = ('{"scope": "agent", "text": "deep", "value": ' + nested + "}").encode()
    response = _raw(world.client("copilot"), "post", "/api/memory", body)
    assert response.status_code == 400
    assert "nested deeper than 32" in response.json()["error"]
    assert _writes() == before


def test_json_values_are_bounded(world):
    before = _writes()
    big = {"blob": "x" * 70_000}
    memory = world.client("scribe").post(
        "/api/memory", {"scope": "agent", "text": "t", "value": big}, format="json"
    )
    assert memory.status_code == 400 and "value" in memory.json()["fields"]
    assert "65,536" in memory.json()["fields"]["value"][0]
    admin = world.client("admin")
    entry = admin.post("/api/entries", {"owner": "copilot", "name": "Acme", "properties": big}, format="json")
    assert entry.status_code == 400 and "properties" in entry.json()["fields"]
    made = admin.post(
        "/api/entries", {"owner": "copilot", "name": "Acme", "properties": {"a": 1}}, format="json"
    )
    assert made.status_code == 201, made.content
    patch = admin.patch(f"/api/entries/{made.json()['id']}", {"properties": big}, format="json")
    assert patch.status_code == 400 and "properties" in patch.json()["fields"]
    assert Entry.objects.get().properties == {"a": 1}
    assert Memory.objects.count() == before[0]


def test_the_console_bounds_entry_properties_too(world, client):
    client.force_login(world.admin)
    page = client.post(
        "/knowledge/entries/new",
        {
            "owner": "copilot",
            "scope": "shared",
            "name": "Acme",
            "properties": json.dumps({"blob": "x" * 70_000}),
        },
    )
    assert page.status_code in (200, 400)
    assert b"65,536" in page.content
    assert not Entry.objects.exists()


# --- unknown fields ---------------------------------------------------------------------------


@pytest.fixture
def objects(world):
    factory.make_conversation(world.copilot, world.general)
    conversation = factory.make_conversation(world.scribe, world.general)
    queued = factory.make_queued_memory(world.copilot, "VPN needs client 5.2")
    active = factory.make_memory(world.copilot, "Printer is on floor 3", store="shared")
    entry = factory.make_entry(world.copilot, name="Acme", blocks=["Acme is a customer"])
    other = factory.make_entry(world.copilot, name="Globex")
    return {
        "queued": queued.pk,
        "active": active.pk,
        "entry": entry.pk,
        "block": entry.blocks.get().pk,
        "other": other.pk,
        "conversation": conversation.pk,
    }


# (token, method, path, a valid body) — each gets a "bogus" field added.
WRITES = [
    ("copilot", "post", "/api/memory", {"scope": "agent", "text": "hello"}),
    ("copilot", "post", "/api/messages", {"channel": "general", "speaker": "alice", "text": "hi"}),
    ("copilot", "post", "/api/memory/search", {"agent": "copilot", "channel": "general", "q": "vpn"}),
    ("copilot", "post", "/api/agents/copilot/context", {"channel": "general", "q": "vpn"}),
    ("copilot", "post", "/api/conversations", {"agent": "copilot", "channel": "general"}),
    ("admin", "post", "/api/channels", {"name": "ops"}),
    ("integration", "put", "/api/sources/ticket/INC-1", {"title": "VPN", "status": "open"}),
    ("admin", "put", "/api/agents/copilot/memo", {"text": "Be brief.", "reason": "start"}),
    ("reviewer", "post", "/api/memory/{queued}/approve", {}),
    ("reviewer", "post", "/api/memory/{queued}/reject", {"reason": "no"}),
    ("reviewer", "post", "/api/memory/{active}/revise", {"text": "Printer is on floor 4", "reason": "moved"}),
    ("reviewer", "post", "/api/memory/{active}/revoke", {"reason": "wrong"}),
    ("admin", "post", "/api/entries", {"owner": "copilot", "name": "Initech"}),
    ("admin", "patch", "/api/entries/{entry}", {"summary": "A customer"}),
    ("admin", "post", "/api/entries/{entry}/blocks", {"text": "Acme renewed"}),
    (
        "admin",
        "patch",
        "/api/entries/{entry}/blocks/{block}",
        {"text": "Acme is a big customer", "reason": "more"},
    ),
    (
        "admin",
        "post",
        "/api/entries/{entry}/relations",
        {"predicate": "partner_of", "target": "{other}", "sources": [{"kind": "memory", "ref": "{active}"}]},
    ),
    ("admin", "put", "/api/guides/copilot", {"types": ["person"]}),
    ("admin", "post", "/api/audit/restore", {"events": [1]}),
    ("reviewer", "post", "/api/memory-consolidations/run", {}),
    ("admin", "post", "/api/eval-datasets", {"name": "memory-gate", "cases": []}),
    ("copilot", "post", "/api/memory/{active}/pin", {}),
    ("reviewer", "post", "/api/memory/{active}/pin", {}),
    ("reviewer", "post", "/api/memory-provenance/check", {}),
    ("reviewer", "post", "/api/memory-gate/{active}/check", {}),
    ("scribe", "post", "/api/conversations/{conversation}/finish", {}),
]


def _fill(value, objects):
    if isinstance(value, str):
        if value.startswith("{") and value.endswith("}") and value[1:-1] in objects:
            return objects[value[1:-1]]
        return value.format(**objects)
    if isinstance(value, dict):
        return {k: _fill(v, objects) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, objects) for v in value]
    return value


@pytest.mark.parametrize("token,method,path,body", WRITES, ids=[f"{m} {p}" for _, m, p, _b in WRITES])
def test_an_unknown_field_is_400_naming_it_and_writes_nothing(world, objects, token, method, path, body):
    before = _writes()
    response = getattr(world.client(token), method)(
        _fill(path, objects), {**_fill(body, objects), "bogus": 1}, format="json"
    )
    if response.status_code == 403:  # this token may not write here at all: also nothing written
        assert _writes() == before
        return
    assert response.status_code == 400, response.content
    assert response.json()["fields"]["bogus"][0].startswith("Unknown field")
    assert _writes() == before


def test_an_unknown_field_inside_a_message_batch_is_400(world):
    factory.make_conversation(world.copilot, world.general)
    response = world.client("copilot").post(
        "/api/messages",
        {"messages": [{"channel": "general", "speaker": "alice", "text": "hi", "speker": "bob"}]},
        format="json",
    )
    assert response.status_code == 400
    assert "speker" in json.dumps(response.json()["fields"])
    assert not Message.objects.exists()
    top = world.client("copilot").post(
        "/api/messages",
        {"messages": [{"channel": "general", "speaker": "a", "text": "x"}], "extra": 1},
        format="json",
    )
    assert top.status_code == 400 and top.json()["fields"]["extra"] == ["Unknown field."]


def test_a_nul_character_in_a_json_text_is_400_and_writes_nothing(world):
    before = _writes()
    for body in (
        b'{"scope": "agent", "text": "a\\u0000b"}',
        b'{"scope": "agent", "text": "t", "value": {"k\\u0000": 1}}',
    ):
        response = _raw(world.client("scribe"), "post", "/api/memory", body)
        assert response.status_code == 400 and "NUL" in response.json()["error"]
    assert _writes() == before
