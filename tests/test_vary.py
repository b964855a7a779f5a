"""Pages that answer htmx requests with a fragment say so (Vary: HX-Request), so no cache hands a
fragment to a full page load or the other way round."""

import pytest

PAGES = [
    "/review/",
    "/memories/",
    "/knowledge/entries/",
    "/knowledge/audit/",
    "/knowledge/status/",
    "/consolidation/",
    "/recall/",
    "/models/",
]


@pytest.mark.parametrize("url", PAGES)
def test_pages_that_also_answer_fragments_vary_on_hx_request(client, world, url):
    client.force_login(world.admin)
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        response = client.get(url, **headers)
        assert response.status_code == 200, url
        assert "HX-Request" in response.headers.get("Vary", ""), url
