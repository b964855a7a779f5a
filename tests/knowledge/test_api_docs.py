import pytest


@pytest.mark.parametrize("who", [None, "copilot", "reviewer", "admin", "integration"])
def test_api_docs_page_renders_with_or_without_a_token(world, who):
    response = world.client(who).get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger-ui" in response.content


def test_a_console_session_still_gets_its_console_context(world, client):
    client.force_login(world.admin)
    response = client.get("/knowledge/status/")
    assert response.status_code == 200
    assert response.context["role"] == "admin"


def test_api_docs_page_refuses_an_unknown_token_without_a_server_error(world):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer nope")
    response = client.get("/api/docs/")
    assert response.status_code == 401
