"""Real API answers validate against the OpenAPI schema served at /api/schema/, strictly: every
field a response carries is declared (an object that lists its properties may hold no others),
lists are lists, and each documented form of a request body is one the API takes."""

from knowledge.entries import services as entries
from tests import factory
from tests.openapi import api_spec, request_schema, response_schema, validate


def check(response, path, method):
    schema = response_schema(path, method, response.status_code)
    assert schema is not None, f"{method.upper()} {path} documents no body for {response.status_code}"
    validate(schema, response.json())


def test_audit_pages_and_events_validate(world):
    factory.make_memory(world.copilot, "VPN-4012 is fixed by client 5.2.1")
    client = world.client("reviewer")
    page = client.get("/api/audit")
    assert page.status_code == 200 and page.json()["results"]
    check(page, "/api/audit", "get")
    event = client.get(f"/api/audit/{page.json()['results'][0]['id']}")
    assert event.json()["revisions"]
    check(event, "/api/audit/{event_id}", "get")


def test_entries_with_blocks_and_relations_validate(world):
    vpn = factory.make_entry(world.copilot, name="VPN", blocks=["Client 5.2.1 fixes E4012."])
    client_entry = factory.make_entry(world.copilot, name="VPN client")
    entries.relation_add(
        actor=factory.SYSTEM,
        entry_id=vpn.pk,
        predicate="uses",
        target_id=client_entry.pk,
        sources=[{"kind": "kb", "ref": "KB-7"}],
    )
    client = world.client("copilot")
    page = client.get("/api/entries")
    assert len(page.json()["results"]) == 2
    check(page, "/api/entries", "get")
    detail = client.get(f"/api/entries/{vpn.pk}")
    assert detail.json()["blocks"] and detail.json()["relations"]
    check(detail, "/api/entries/{entry_id}", "get")
    incoming = client.get(f"/api/entries/{client_entry.pk}")
    assert incoming.json()["incoming_relations"]
    check(incoming, "/api/entries/{entry_id}", "get")


def test_post_messages_documents_the_single_and_the_batch_form(world):
    body_schema = request_schema("/api/messages", "post")
    forms = api_spec()["components"]["schemas"][body_schema["$ref"].rsplit("/", 1)[1]]["oneOf"]
    assert len(forms) == 2
    single = {"channel": "general", "speaker": "alice", "text": "VPN error E4012", "external_id": "m-1"}
    batch = {"messages": [{"channel": "general", "speaker": "bob", "text": "me too", "external_id": "m-2"}]}
    client = world.client("admin")
    for body in (single, batch):
        validate(body_schema, body)
        response = client.post("/api/messages", body, format="json")
        assert response.status_code == 201, response.content
        check(response, "/api/messages", "post")
    repeat = client.post("/api/messages", batch, format="json")
    assert repeat.status_code == 200 and repeat.json()["duplicates"] == 1
    check(repeat, "/api/messages", "post")


def test_search_response_declares_every_field(world):
    conversation = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(
        world.general,
        [
            {"speaker": "alice", "text": "The VPN shows error E4012", "external_id": "s-1"},
            {"speaker": "bob", "text": "Client 5.2.1 fixes E4012", "external_id": "s-2"},
        ],
    )
    factory.make_memory(world.copilot, "VPN error E4012 is fixed by client 5.2.1", store="shared")
    factory.make_entry(world.copilot, name="E4012", blocks=["The VPN error E4012 means an old client."])
    factory.embed_all()
    response = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conversation.pk, "q": "E4012"},
        format="json",
    )
    assert response.status_code == 200, response.content
    kinds = {r["kind"] for r in response.json()["results"]}
    assert {"message", "memory", "entry"} <= kinds
    check(response, "/api/memory/search", "post")


def test_memory_pages_validate(world):
    factory.make_memory(world.copilot, "VPN-4012 is fixed by client 5.2.1", store="shared")
    page = world.client("reviewer").get("/api/memory")
    assert page.json()["results"]
    check(page, "/api/memory", "get")


def test_errors_validate_against_the_documented_error(world):
    client = world.client("copilot")
    response = client.post("/api/entries", {"name": ""}, format="json")
    assert response.status_code == 400
    check(response, "/api/entries", "post")
    response = client.get("/api/entries/999999")
    assert response.status_code == 404
    check(response, "/api/entries/{entry_id}", "get")


def test_the_served_schema_is_the_one_checked(world):
    response = world.client(None).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert response.json() == api_spec()


def test_status_validates_for_agents_and_reviewers(world):
    factory.make_conversation(world.copilot, world.general)
    for who in ("copilot", "reviewer"):
        response = world.client(who).get("/api/status")
        assert response.status_code == 200
        check(response, "/api/status", "get")


def test_each_kind_of_browse_answer_validates_as_exactly_one_form(world):
    from django.utils import timezone

    from knowledge.models import Episode, Message

    conversation = factory.make_conversation(world.copilot, world.general)
    lone, threaded = factory.post_messages(
        world.general,
        [
            {"speaker": "alice", "text": "The VPN shows error E4012", "external_id": "b-1"},
            {"speaker": "bob", "text": "Client 5.2.1 fixes it", "external_id": "b-2", "thread": "t-1"},
        ],
    )
    now = timezone.now()
    episode = Episode.objects.create(
        channel=world.general,
        store="shared",
        topic="VPN error",
        summary="E4012 after the update.",
        start_ts=now,
        end_ts=now,
    )
    Message.objects.filter(pk=lone).update(episode=episode)
    entry = factory.make_entry(world.copilot, name="VPN", blocks=["Client 5.2.1 fixes E4012."])
    memory = factory.make_memory(
        world.copilot,
        "E4012 is fixed by client 5.2.1",
        store="shared",
        sources=[{"kind": "message", "ref": str(lone)}, {"kind": "kb", "ref": "KB-7"}],
    )
    documented = response_schema("/api/memory/browse/{kind}/{id}", "get", 200)
    forms = api_spec()["components"]["schemas"][documented["$ref"].rsplit("/", 1)[1]]["oneOf"]
    assert len(forms) == 6
    client = world.client("copilot")
    for kind, pk in [
        ("message", lone),
        ("message", threaded),
        ("thread", threaded),
        ("episode", episode.pk),
        ("entry", entry.pk),
        ("memory", memory.pk),
        ("conversation", conversation.pk),
    ]:
        response = client.get(f"/api/memory/browse/{kind}/{pk}?conversation={conversation.pk}")
        assert response.status_code == 200, (kind, response.content)
        assert response.json()["kind"] == kind
        check(response, "/api/memory/browse/{kind}/{id}", "get")


def test_a_refused_contradiction_validates_against_the_documented_conflict(world):
    from knowledge.principals.services import setting_set

    setting_set(actor=factory.SYSTEM, name="BRAIN_STRICT_ANTI_DRIFT", value=True)
    key = "customer.acme.preferences"
    factory.make_memory(
        world.copilot, key=key, value={"channel": "slack"}, text="Acme prefers Slack", confidence=0.95
    )
    body = {"scope": "agent", "key": key, "value": {"channel": "email"}, "text": "Acme prefers e-mail"}
    response = world.client("copilot").post("/api/memory", body, format="json")
    assert response.status_code == 409
    assert response.json()["conflicts_with"]
    check(response, "/api/memory", "post")


def test_a_decision_on_a_memory_no_longer_queued_validates_against_the_documented_conflict(world):
    memory = factory.make_memory(world.copilot, "VPN-4012 is fixed by client 5.2.1")
    response = world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    assert response.status_code == 409
    assert response.json()["status"] == "active"
    check(response, "/api/memory/{memory_id}/approve", "post")
