"""Curation guides: one per principal in its self store, edited only by admins, versioned and
audited; agents (and Dreaming) only read them."""

from knowledge.models import AuditEvent, CurationGuide
from tests.factory import make_agent, make_token

GUIDE = {
    "domain_types": ["person", "System", "vendor"],
    "taxonomy": "people → teams → systems",
    "page_thresholds": {"min_mentions_for_entry": 3, "max_blocks": 30},
    "update_rules": "Keep old facts with their end date.",
}


def test_an_agent_token_cannot_edit_a_curation_guide(world):
    for who in ("copilot", "scribe"):
        response = world.client(who).put(f"/api/guides/{who}", GUIDE, format="json")
        assert response.status_code == 403
    assert world.client("reviewer").put("/api/guides/copilot", GUIDE, format="json").status_code == 403
    assert not CurationGuide.objects.exists()


def test_an_admin_edits_a_guide_in_versions_with_an_audit_trail(world):
    admin = world.client("admin")
    first = admin.put("/api/guides/copilot", {**GUIDE, "version": 0}, format="json")
    assert first.status_code == 200, first.json()
    body = first.json()
    assert body["version"] == 1 and body["store"] == "self" and body["updated_by"] == "adam"
    assert body["domain_types"] == ["person", "system", "vendor"]
    second = admin.put(
        "/api/guides/copilot", {"update_rules": "Never store guesses.", "version": 1}, format="json"
    )
    assert second.json()["version"] == 2 and second.json()["taxonomy"] == GUIDE["taxonomy"]
    stale = admin.put("/api/guides/copilot", {"taxonomy": "flat", "version": 1}, format="json")
    assert stale.status_code == 409
    events = AuditEvent.objects.filter(object_type="guide").order_by("id")
    assert [e.action for e in events] == ["guide.created", "guide.updated"]
    assert events[1].owner == "copilot" and events[1].store == "self"
    rev = events[1].revisions.get()
    assert (
        rev.before["update_rules"] == GUIDE["update_rules"]
        and rev.after["update_rules"] == "Never store guesses."
    )
    bad = admin.put("/api/guides/copilot", {"page_thresholds": {"max": "many"}}, format="json")
    assert bad.status_code == 400 and "page_thresholds" in bad.json()["fields"]


def test_agents_read_only_their_own_guide(world):
    world.client("admin").put("/api/guides/copilot", GUIDE, format="json")
    own = world.client("copilot").get("/api/guides/copilot")
    assert own.status_code == 200 and own.json()["taxonomy"] == GUIDE["taxonomy"]
    assert world.client("scribe").get("/api/guides/copilot").status_code == 404
    defaults = world.client("scribe").get("/api/guides/scribe").json()
    assert defaults["version"] == 0 and defaults["domain_types"] == CurationGuide.DEFAULT_DOMAIN_TYPES
    other = make_agent("helper")
    token = make_token(agent=other)
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/guides/copilot").status_code == 404


def test_the_entries_tab_shows_the_owners_guide_and_admins_edit_it(client, world):
    client.force_login(world.admin)
    page = client.get("/knowledge/entries/")
    assert b"Select an owner principal" in page.content
    session = client.session
    session["owner"] = "copilot"
    session.save()
    page = client.get("/knowledge/entries/")
    assert b"Curation guide of copilot" in page.content and b"Edit the curation guide" in page.content
    form = {
        "domain_types": "person, system",
        "taxonomy": "flat",
        "page_thresholds": '{"max_blocks": 20}',
        "update_rules": "No guesses.",
        "version": "0",
    }
    saved = client.post("/knowledge/guide/copilot", form, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="guide")
    assert saved.status_code == 200 and b"<html" not in saved.content
    assert b"Curation guide saved (version 1)" in saved.content
    guide = CurationGuide.objects.get(owner=world.copilot)
    assert guide.page_thresholds == {"max_blocks": 20} and guide.domain_types == ["person", "system"]
    invalid = client.post("/knowledge/guide/copilot", {**form, "page_thresholds": "{oops", "version": "1"})
    assert invalid.status_code == 302
    assert CurationGuide.objects.get(owner=world.copilot).version == 1


def test_a_reviewer_sees_the_guide_but_cannot_edit_it(client, world):
    client.force_login(world.reviewer)
    session = client.session
    session["owner"] = "copilot"
    session.save()
    page = client.get("/knowledge/entries/")
    assert b"Curation guide of copilot" in page.content
    assert b"Edit the curation guide" not in page.content
    refused = client.post("/knowledge/guide/copilot", {"taxonomy": "x", "version": "0"})
    assert refused.status_code == 403
    assert not CurationGuide.objects.exists()


def test_the_curation_guides_open_without_picking_an_owner(client, world):
    CurationGuide.objects.create(owner=world.scribe, domain_types=["vendor"], updated_by="adam", version=3)
    client.force_login(world.admin)
    entries = client.get("/knowledge/entries/").content.decode()
    assert 'href="/knowledge/guide/"' in entries  # no owner picked: the way to every guide
    index = client.get("/knowledge/guide/")
    assert index.status_code == 200
    page = index.content.decode()
    assert 'data-agent="copilot"' in page and 'data-agent="scribe"' in page
    assert "version 3 · by adam" in page and "not written yet (defaults)" in page
    assert "Curation guide of" not in page  # the list alone until one is opened
    opened = client.get("/knowledge/guide/copilot")  # a plain GET, no htmx: the page, not a redirect
    assert opened.status_code == 200 and b"<html" in opened.content
    assert b"Curation guide of copilot" in opened.content and b"Edit the curation guide" in opened.content
    form = {
        "domain_types": "person",
        "taxonomy": "flat",
        "page_thresholds": "{}",
        "update_rules": "",
        "version": "0",
    }
    saved = client.post("/knowledge/guide/copilot", form)
    assert saved.status_code == 302 and saved["Location"] == "/knowledge/guide/copilot"
    after = client.get(saved["Location"]).content.decode()
    assert "Curation guide of copilot saved (version 1)." in after and "version 1 · by" in after
    assert CurationGuide.objects.get(owner=world.copilot).domain_types == ["person"]


def test_a_reviewer_opens_every_guide_but_edits_none(client, world):
    client.force_login(world.reviewer)
    assert b'data-agent="scribe"' in client.get("/knowledge/guide/").content
    page = client.get("/knowledge/guide/scribe")
    assert page.status_code == 200 and b"Curation guide of scribe" in page.content
    assert b"Edit the curation guide" not in page.content and b"Only admins edit" in page.content
    assert client.get("/knowledge/guide/nobody").status_code == 404


def test_the_guide_form_reads_thresholds_as_the_guide_shows_them(client, world):
    """The guide shows thresholds as `name value` lines; its form takes them back that way (and
    still as JSON), and refuses a bad line by its number, saving nothing."""
    client.force_login(world.admin)
    form = {"domain_types": "", "taxonomy": "", "update_rules": "", "version": "0"}
    saved = client.post(
        "/knowledge/guide/copilot",
        {**form, "page_thresholds": "min_mentions_for_entry 3\n\nmax_blocks 30\nmin_score 0.5"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="guide",
    )
    assert b"Curation guide saved (version 1)" in saved.content
    guide = CurationGuide.objects.get(owner=world.copilot)
    assert guide.page_thresholds == {"min_mentions_for_entry": 3, "max_blocks": 30, "min_score": 0.5}
    # the edit form offers them back as the same lines
    import re

    shown = re.search(
        r'<textarea name="page_thresholds"[^>]*>\n?(.*?)</textarea>', saved.content.decode(), re.S
    )
    assert set(shown.group(1).splitlines()) == {"min_mentions_for_entry 3", "max_blocks 30", "min_score 0.5"}
    bad = client.post(
        "/knowledge/guide/copilot",
        {**form, "page_thresholds": "max_blocks 30\nmax_blocks lots\nspare", "version": "1"},
        follow=True,
    )
    body = bad.content.decode()
    assert "Line 2 (max_blocks lots): lots is not a number." in body
    assert "Line 3 (spare): write a name and a number, like min_blocks 3." in body
    assert CurationGuide.objects.get(owner=world.copilot).version == 1
