"""The Knowledge page's Entries tab and the entry editor, as plain form posts and as htmx."""

import pytest

from knowledge.models import AuditEvent, Entry, EntryRelation, Memory
from tests.factory import make_entry

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def admin(client, world):
    client.force_login(world.admin)
    return client


@pytest.fixture
def vpn(world):
    return make_entry(
        world.copilot,
        name="VPN client",
        type="system",
        aliases=["GlobalProtect"],
        summary="The company VPN.",
        blocks=[
            {"text": "Use client 5.2.1.", "sources": [{"kind": "kb", "ref": "KB-7"}]},
            "Needs admin rights.",
        ],
    )


def test_the_knowledge_page_opens_on_the_entries_tab(admin, world, vpn):
    page = admin.get("/knowledge/", follow=True)
    assert page.redirect_chain[-1][0] == "/knowledge/entries/"
    body = page.content.decode()
    assert 'aria-current="page">Entries</a>' in body and ">Audit</a>" in body
    assert "VPN client" in body and "GlobalProtect" in body


def test_search_by_alias_and_htmx_returns_only_the_results(admin, world, vpn):
    make_entry(world.copilot, name="Payroll")
    page = admin.get("/knowledge/entries/", {"q": "globalprotect"})
    assert b"VPN client" in page.content and b"Payroll" not in page.content
    fragment = admin.get("/knowledge/entries/", {"q": "payrol"}, HTTP_HX_TARGET="results", **HX)
    assert b"<html" not in fragment.content and b"Payroll" in fragment.content
    assert b"VPN client" not in fragment.content


def test_the_owner_selector_filters_the_list(admin, world, vpn):
    make_entry(world.scribe, name="Scribe minutes")
    admin.post("/owner", {"owner": "scribe", "next": "/knowledge/entries/"})
    body = admin.get("/knowledge/entries/").content
    assert b"Scribe minutes" in body and b"VPN client" not in body


def test_bad_filters_show_an_error_instead_of_failing(admin, world, vpn):
    page = admin.get("/knowledge/entries/", {"updated_after": "yesterday-ish"})
    assert page.status_code == 200 and b"updated_after" in page.content


def test_the_editor_shows_blocks_with_author_version_and_sources(admin, world, vpn):
    body = admin.get(f"/knowledge/entries/{vpn.pk}/").content.decode()
    assert "Use client 5.2.1." in body and "kb:KB-7" in body
    assert "v1" in body and "by person tests" in body


def test_correcting_a_block_without_a_reason_is_refused(admin, world, vpn):
    block = vpn.created_blocks[0]
    url = f"/knowledge/entries/{vpn.pk}/blocks/{block.pk}/correct"
    refused = admin.post(url, {"text": "Use client 5.2.2.", "reason": "", "version": "1"})
    assert refused.status_code == 400
    assert b"A reason is required to correct a block." in refused.content
    refused = admin.post(url, {"text": "Use client 5.2.2.", "reason": ""}, **HX)
    assert b"A reason is required" in refused.content and b"<html" not in refused.content
    assert Memory.objects.get(pk=block.pk).text == "Use client 5.2.1."


def test_correcting_a_block_with_a_reason_shows_the_new_author_and_version(admin, world, vpn):
    block = vpn.created_blocks[0]
    url = f"/knowledge/entries/{vpn.pk}/blocks/{block.pk}/correct"
    form = admin.get(url, **HX)
    assert b'name="reason"' in form.content and b"Use client 5.2.1." in form.content
    saved = admin.post(
        url, {"text": "Use client 5.2.2.", "reason": "5.2.1 is withdrawn", "version": "1"}, **HX
    )
    assert saved.status_code == 200
    fragment = saved.content.decode()
    assert f'id="block-{block.pk}"' in fragment and "Use client 5.2.2." in fragment
    assert "v2" in fragment and "by person adam" in fragment
    history = admin.get(f"/knowledge/entries/{vpn.pk}/blocks/{block.pk}/history", **HX).content.decode()
    assert "5.2.1 is withdrawn" in history and "Use client 5.2.1." in history
    stale = admin.post(url, {"text": "Use client 6.", "reason": "later", "version": "1"}, **HX)
    assert b"since you opened it" in stale.content
    plain = admin.post(url, {"text": "Use client 5.2.3.", "reason": "patch", "version": "2"})
    assert plain.status_code == 302 and Memory.objects.get(pk=block.pk).version == 3


def test_without_javascript_correct_opens_the_form_in_the_page(admin, world, vpn):
    block = vpn.created_blocks[0]
    page = admin.get(f"/knowledge/entries/{vpn.pk}/", {"correct": block.pk})
    assert b"Save correction" in page.content
    redirect = admin.get(f"/knowledge/entries/{vpn.pk}/blocks/{block.pk}/correct")
    assert redirect.status_code == 302 and f"correct={block.pk}" in redirect["Location"]


def test_metadata_form_validates_properties_json(admin, world, vpn):
    url = f"/knowledge/entries/{vpn.pk}/meta"
    form = {"name": "VPN client", "type": "system", "aliases": "GP, vpn", "summary": "s", "version": "1"}
    bad = admin.post(url, {**form, "properties": "{not json"})
    assert bad.status_code == 400 and b"Not valid JSON" in bad.content
    assert Entry.objects.get(pk=vpn.pk).version == 1
    ok = admin.post(url, {**form, "properties": '{"vendor": "Palo Alto"}'}, **HX)
    assert b"Saved (version 2)" in ok.content
    entry = Entry.objects.get(pk=vpn.pk)
    assert entry.properties == {"vendor": "Palo Alto"} and entry.aliases == ["GP", "vpn"]


def test_blocks_are_added_reordered_and_removed_with_plain_posts(admin, world, vpn):
    first, second = vpn.created_blocks
    assert (
        admin.post(
            f"/knowledge/entries/{vpn.pk}/blocks", {"text": "Third.", "sources": "kb:KB-9"}
        ).status_code
        == 302
    )
    third = Memory.objects.get(entry=vpn, text="Third.")
    assert [s.ref for s in third.sources.all()] == ["KB-9"]
    bad = admin.post(f"/knowledge/entries/{vpn.pk}/blocks", {"text": "x", "sources": "rumour:1"})
    assert bad.status_code == 400 and b"Source kind must be one of" in bad.content
    admin.post(f"/knowledge/entries/{vpn.pk}/blocks/{third.pk}/move", {"position": "0"})
    order = list(
        Memory.objects.filter(entry=vpn, status="active").order_by("position").values_list("text", flat=True)
    )
    assert order == ["Third.", "Use client 5.2.1.", "Needs admin rights."]
    fragment = admin.post(f"/knowledge/entries/{vpn.pk}/blocks/{second.pk}/remove", **HX)
    assert b"Needs admin rights." not in fragment.content and b"<html" not in fragment.content
    assert Memory.objects.get(pk=second.pk).status == Memory.INVALIDATED


def test_a_relation_without_evidence_is_refused_in_the_console(admin, world, vpn):
    team = make_entry(world.copilot, name="IT team")
    url = f"/knowledge/entries/{vpn.pk}/relations"
    refused = admin.post(url, {"predicate": "owned by", "target": team.pk, "sources": ""})
    assert refused.status_code == 400 and b"At least one evidence source is required." in refused.content
    assert not EntryRelation.objects.exists()
    added = admin.post(url, {"predicate": "owned by", "target": team.pk, "sources": "ticket:INC-3"}, **HX)
    assert b"IT team" in added.content
    rel = EntryRelation.objects.get()
    admin.post(f"/knowledge/entries/{vpn.pk}/relations/{rel.pk}/remove")
    assert not EntryRelation.objects.exists()


def test_creating_and_deleting_an_entry_in_the_console(admin, world):
    form = {
        "owner": "copilot",
        "scope": "shared",
        "name": "Printer",
        "type": "system",
        "aliases": "HP, printer 3F",
        "properties": "",
        "first_block": "Third floor.",
        "first_block_sources": "message:m-1",
    }
    created = admin.post("/knowledge/entries/new", form)
    entry = Entry.objects.get(name="Printer")
    assert created["Location"] == f"/knowledge/entries/{entry.pk}/"
    assert entry.aliases == ["HP", "printer 3F"] and entry.block_count == 1
    assert admin.post("/knowledge/entries/new", {**form, "scope": "nowhere"}).status_code == 400
    deleted = admin.post(f"/knowledge/entries/{entry.pk}/delete", {"reason": "sold"}, follow=True)
    assert b"deleted" in deleted.content
    event = AuditEvent.objects.get(action="entry.deleted")
    page = admin.get(f"/knowledge/entries/{entry.pk}/").content.decode()
    assert "This entry was deleted" in page and f"/knowledge/audit/{event.pk}/" in page


def test_projection_renders_markdown_safely_and_links_sources(admin, world):
    evil = make_entry(
        world.copilot,
        name="Tricky",
        blocks=[
            {
                "text": "**Bold** <script>alert('x')</script> [click](javascript:alert(1)) "
                '<img src=x onerror="alert(2)"> [docs](https://example.com/kb)',
                "sources": [{"kind": "entry", "ref": "1"}, {"kind": "kb", "ref": "https://kb.example.com/7"}],
            }
        ],
    )
    body = admin.get(f"/knowledge/entries/{evil.pk}/projection").content.decode()
    article = body.split('<article class="projection">')[1].split("</article>")[0]
    assert "<strong>Bold</strong>" in article
    assert "<script" not in article and "javascript:" not in article and "onerror" not in article
    assert 'href="https://example.com/kb"' in article
    assert 'href="/knowledge/entries/1/"' in body and 'href="https://kb.example.com/7"' in body
    assert "&lt;script&gt;" in body  # the raw Markdown is shown escaped


def test_entry_audit_tab_lists_its_history(admin, world, vpn):
    block = vpn.created_blocks[0]
    admin.post(f"/knowledge/entries/{vpn.pk}/blocks/{block.pk}/correct", {"text": "New.", "reason": "why"})
    other = make_entry(world.copilot, name="Other")
    body = admin.get(f"/knowledge/entries/{vpn.pk}/audit").content.decode()
    assert "block.corrected" in body and "entry.created" in body
    assert f'value="{AuditEvent.objects.get(action="block.corrected").pk}"' in body  # selectable for admins
    other_event = AuditEvent.objects.get(action="entry.created", data__entry=other.pk)
    assert f"event-{other_event.pk}" not in body


def test_the_audit_tab_filters_and_previews_an_event(admin, world, vpn):
    block = vpn.created_blocks[0]
    admin.post(
        f"/knowledge/entries/{vpn.pk}/blocks/{block.pk}/correct",
        {"text": "Use client 5.2.2.", "reason": "why"},
    )
    event = AuditEvent.objects.get(action="block.corrected")
    listed = admin.get("/knowledge/audit/", {"action": "block.corrected"}).content.decode()
    created = AuditEvent.objects.get(action="entry.created")
    assert f"event-{event.pk}" in listed and f"event-{created.pk}" not in listed
    assert admin.get("/knowledge/audit/", {"actor": "nobody"}).content.count(b'id="event-') == 0
    detail = admin.get(f"/knowledge/audit/{event.pk}/").content.decode()
    assert "<del>5.2.1.</del>" in detail and "<ins>5.2.2.</ins>" in detail
    assert "Preview restore" in detail


def test_reviewers_edit_entries_but_agents_pages_need_a_role(client, world, vpn):
    from django.contrib.auth import get_user_model

    nobody = get_user_model().objects.create_user("nobody", password="correct-horse-9")
    client.force_login(nobody)
    assert client.get("/knowledge/entries/").status_code == 403
    client.force_login(world.reviewer)
    block = vpn.created_blocks[0]
    ok = client.post(
        f"/knowledge/entries/{vpn.pk}/blocks/{block.pk}/correct", {"text": "By Rita.", "reason": "r"}
    )
    assert ok.status_code == 302 and Memory.objects.get(pk=block.pk).author_name == "rita"


def test_audit_previews_escape_the_texts_they_compare(admin, world, vpn):
    block = vpn.created_blocks[0]
    url = f"/knowledge/entries/{vpn.pk}/blocks/{block.pk}/correct"
    admin.post(url, {"text": "<script>alert(1)</script> new", "reason": "<b>why</b>"})
    event = AuditEvent.objects.get(action="block.corrected")
    for page in (
        admin.get(f"/knowledge/audit/{event.pk}/"),
        admin.get("/knowledge/audit/restore", {"events": event.pk}),
    ):
        body = page.content.decode()
        assert "<script>alert(1)" not in body and "&lt;script&gt;alert(1)" in body
        assert "<b>why</b>" not in body
