"""HTML learned as its page reads (issue 53): the main content only, one block per block of the
page, the page's own title when none is given, and a refusal shown beside its field."""

import pytest

from knowledge.materials import extract
from knowledge.models import Entry, Material, Memory

pytestmark = pytest.mark.django_db

GUEST_WIFI = """<!doctype html>
<html><head><title>Guest Wi-Fi</title><style>body { color: red }</style>
<script>var tracking = "ga-123";</script></head>
<body>
<header><a href="/">Home</a> | <a href="/menu">Menu</a> | <a href="/login">Login</a></header>
<nav><ul><li><a href="/it">IT</a></li><li><a href="/hr">HR</a></li></ul></nav>
<article>
  <header><h1>Guest Wi-Fi</h1><p class="byline">IT desk</p></header>
  <p>The guest network is <b>Acme-Guest</b>.
     The password changes every Monday.</p>
  <p>Ask reception for the card<br>with this week's password.</p>
  <h2>Limits</h2>
  <ul><li>two devices per guest</li><li>no video calls</li></ul>
  <table><tr><th>Floor</th><th>Signal</th></tr><tr><td>1</td><td>good</td></tr></table>
</article>
<aside>Related: Printers</aside>
<footer>© 2026 Acme · Privacy</footer>
</body></html>"""


def test_a_page_reads_as_its_main_content_in_blocks_with_its_own_title():
    page = extract.html_read(GUEST_WIFI)
    assert page.title == "Guest Wi-Fi"
    assert page.text.split("\n\n") == [
        "# Guest Wi-Fi",
        "IT desk",
        "The guest network is Acme-Guest. The password changes every Monday.",
        "Ask reception for the card\nwith this week's password.",
        "## Limits",
        "- two devices per guest\n- no video calls",
        "Floor | Signal\n1 | good",
    ]
    for chrome in ("Home", "Menu", "Login", "HR", "Printers", "Privacy", "ga-123", "color"):
        assert chrome not in page.text


def test_only_main_is_read_when_the_page_marks_it_and_the_first_h1_titles_a_page_without_title():
    page = extract.html_read(
        "<div class=top>Acme intranet | Search</div><main><h1>Lunch &amp; dinner</h1>"
        "<p>Lunch is at noon.<p>Dinner at seven.</main><div>Cookie banner</div>"
    )
    assert (page.title, page.text) == (
        "Lunch & dinner",
        "# Lunch & dinner\n\nLunch is at noon.\n\nDinner at seven.",
    )
    assert extract.html_read("<p>No heading here.</p>").title == ""


def test_broken_markup_still_drops_the_chrome_and_keeps_the_text():
    page = extract.html_read("<p>Unclosed <b>bold<nav>Home | Login<p>after the nav")
    assert "Home" not in page.text and page.text.startswith("Unclosed bold")


def test_the_sections_of_a_page_start_at_its_headings_not_at_its_navigation():
    sections = extract.extract(extract.HTML, GUEST_WIFI.encode()).sections
    assert [s.title for s in sections] == ["Guest Wi-Fi", "Limits"]
    assert sections[0].text.startswith("IT desk\n\nThe guest network is Acme-Guest.")


def test_pasted_html_without_a_title_takes_the_pages_and_text_without_one_is_refused(world):
    client = world.client("reviewer")
    answer = client.post("/api/materials", {"html": GUEST_WIFI, "agent": "copilot"}, format="json")
    assert answer.status_code == 201, answer.json()
    material = Material.objects.get(pk=answer.json()["material"]["id"])
    assert (
        material.title == "Guest Wi-Fi" and Entry.objects.get(pk=answer.json()["entry"]).name == "Guest Wi-Fi"
    )
    first = Memory.objects.filter(entry_id=answer.json()["entry"]).order_by("position").first()
    assert first.text.startswith("Guest Wi-Fi: IT desk") and "Menu" not in first.text

    refused = client.post("/api/materials", {"text": "Be kind.", "agent": "copilot"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"] == {"title": ["Give a title: the pasted text has none."]}
    assert Material.objects.count() == 1


def test_the_console_shows_a_refusal_beside_its_field_and_keeps_what_was_entered(client, world):
    client.force_login(world.reviewer)
    response = client.post(
        "/knowledge/materials/new", {"agent": "copilot", "scope": "shared", "text": "Be <kind>."}
    )
    assert response.status_code == 400
    body = response.content.decode()
    form = body.split('id="learn-form"')[1].split("</form>")[0]
    title = form.split('name="title"')[1].split("</label>")[0]
    assert 'aria-invalid="true"' in title and "Give a title: the pasted text has none." in title
    assert "Be &lt;kind&gt;.</textarea>" in form  # kept, escaped
    assert not Material.objects.exists() and not Entry.objects.exists()

    nothing = client.post("/knowledge/materials/new", {"agent": "copilot", "title": "Empty"})
    assert nothing.status_code == 400
    assert (
        "Upload a file, paste text, or paste web content."
        in nothing.content.decode().split('id="learn-form"')[1]
    )

    scope = client.post(
        "/knowledge/materials/new", {"agent": "copilot", "scope": "moon", "text": "x", "title": "t"}
    )
    field = scope.content.decode().split('name="scope"')[1].split("</label>")[0]
    assert "Use agent, shared, workspace" in field and not Material.objects.exists()

    learned = client.post("/knowledge/materials/new", {"agent": "copilot", "html": GUEST_WIFI})
    assert learned.status_code == 302 and Material.objects.get().title == "Guest Wi-Fi"
