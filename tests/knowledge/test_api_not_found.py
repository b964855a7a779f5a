def test_a_url_no_api_view_answers_is_a_json_404(world):
    for path in ("/api/entries/-1", "/api/nothing-here", "/api/memory/browse/thread/x"):
        response = world.client("copilot").get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"error": "Not found."}


def test_a_console_url_that_does_not_exist_is_still_a_page(client):
    response = client.get("/nothing-here/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_a_null_character_in_an_api_path_or_parameter_is_refused_as_json(world):
    client = world.client("admin")
    response = client.get("/api/eval-datasets/a%00b")
    assert response.status_code == 404
    assert response.json() == {"error": "Not found."}
    response = client.get("/api/entries?owner=a%00b&q=vpn")
    assert response.status_code == 400
    assert response.json() == {"error": "invalid", "fields": {"owner": ["Null characters are not allowed."]}}


def test_a_request_refused_before_any_view_is_a_json_400_under_the_api(world):
    client = world.client("copilot")
    response = client.post("/api/conversations", {"agent": "copilot"}, format="json", HTTP_HOST="7,iG?#EXk")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "Bad request."}
    assert "7,iG" not in response.content.decode()


def test_a_console_request_refused_before_any_view_is_still_a_page(client):
    response = client.get("/login/", HTTP_HOST="7,iG?#EXk")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
