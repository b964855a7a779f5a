"""Connector documents: an integration mirrors documents only into the stores an admin granted
it (`/api/connector-grants`, the Connector grants page) and changes or withdraws only its own
documents; nothing is written when it may not (`knowledge.access.check_connector_write`)."""

import pytest

from knowledge.models import AuditEvent, ConnectorGrant, Material
from knowledge.principals import services as principals
from tests import factory

DOC = {"title": "Refund policy", "version": "v1", "content": "Refunds within 30 days.", "agent": "copilot"}


@pytest.fixture
def second(world):
    """A second integration with a token of its own."""
    integration = principals.integration_create(actor=factory.SYSTEM, name="crm")
    return world.client(None), factory.make_token(integration=integration)


def _client(world, token):
    client = world.client(None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _grant(world, integration="tickets", agent="copilot", scope="shared"):
    return world.client("admin").post(
        "/api/connector-grants", {"integration": integration, "agent": agent, "scope": scope}, format="json"
    )


def _put(client, ref="KB-7", **extra):
    return client.put(f"/api/connectors/wiki/documents/{ref}", {**DOC, **extra}, format="json")


@pytest.mark.parametrize("scope", ["shared", "agent", "private:alice"])
def test_without_a_grant_an_integration_writes_into_no_agents_store(world, scope):
    response = _put(world.client("integration"), scope=scope)
    assert response.status_code == 403, response.content
    assert "no grant" in response.json()["error"]
    assert not Material.objects.exists()


def test_a_grant_opens_exactly_one_store_of_one_agent(world):
    assert _grant(world).status_code == 201
    client = world.client("integration")
    created = _put(client)
    assert created.status_code == 201, created.content
    material = Material.objects.get()
    assert (material.owner.name, material.store, material.integration.name) == (
        "copilot",
        "shared",
        "tickets",
    )
    assert _put(client, ref="KB-8", scope="agent").status_code == 403  # copilot's self store: not granted
    assert _put(client, ref="KB-9", agent="scribe").status_code == 403  # another agent
    assert Material.objects.count() == 1


def test_a_second_integration_can_neither_overwrite_nor_withdraw_the_firsts_document(world, second):
    _grant(world)
    _grant(world, integration="crm")
    assert _put(world.client("integration")).status_code == 201
    crm = _client(world, second[1])
    overwrite = _put(crm, version="v2", content="Refunds never.")
    assert overwrite.status_code == 403 and "another integration" in overwrite.json()["error"]
    assert crm.delete("/api/connectors/wiki/documents/KB-7").status_code == 403
    assert _put(crm, access="lost").status_code == 403
    material = Material.objects.get()
    assert material.version.label == "v1" and not material.withdrawn
    # its owner may, and an admin may
    assert _put(world.client("integration"), version="v2", content="Refunds within 14 days.").json()[
        "outcome"
    ] == ("updated")
    assert world.client("admin").delete("/api/connectors/wiki/documents/KB-7").status_code == 200


def test_a_grant_taken_back_refuses_the_next_write(world):
    grant = _grant(world).json()
    client = world.client("integration")
    assert _put(client).status_code == 201
    assert world.client("admin").delete(f"/api/connector-grants/{grant['id']}").status_code == 204
    assert _put(client, version="v2", content="changed").status_code == 403
    assert Material.objects.get().version.label == "v1"
    assert AuditEvent.objects.filter(action="connector_grant.deleted").count() == 1


def test_only_admins_manage_grants_and_bad_grants_write_nothing(world):
    body = {"integration": "tickets", "agent": "copilot", "scope": "shared"}
    for who in ("integration", "copilot", "reviewer"):
        response = world.client(who).post("/api/connector-grants", body, format="json")
        assert response.status_code == 403, (who, response.content)
    assert not ConnectorGrant.objects.exists()
    assert _grant(world).status_code == 201
    assert _grant(world).status_code == 409  # the same grant twice
    assert _grant(world, agent="nobody").status_code == 400
    assert _grant(world, integration="nobody").status_code == 400
    assert _grant(world, scope="everywhere").status_code == 400
    assert ConnectorGrant.objects.count() == 1
    listed = world.client("admin").get("/api/connector-grants").json()
    assert [(g["integration"], g["agent"], g["store"]) for g in listed] == [("tickets", "copilot", "shared")]
    grant = ConnectorGrant.objects.get()
    assert world.client("integration").delete(f"/api/connector-grants/{grant.pk}").status_code == 403
    assert ConnectorGrant.objects.exists()


def test_admins_grant_and_take_back_on_the_console(client, world):
    client.force_login(world.admin)
    page = client.get("/knowledge/connector-grants/")
    assert page.status_code == 200 and b"No grants" in page.content
    client.post(
        "/knowledge/connector-grants/", {"integration": "tickets", "agent": "copilot", "scope": "agent"}
    )
    grant = ConnectorGrant.objects.get()
    assert (grant.agent.name, grant.store, grant.updated_by) == ("copilot", "self", "adam")
    assert b"copilot" in client.get("/knowledge/connector-grants/").content
    client.post(f"/knowledge/connector-grants/{grant.pk}/delete")
    assert not ConnectorGrant.objects.exists()
    client.force_login(world.reviewer)
    assert client.get("/knowledge/connector-grants/").status_code in (302, 403)
