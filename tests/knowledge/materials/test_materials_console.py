"""The Materials tab and a material's page over HTTP: listing, refusals shown and nothing stored,
paste opening the new entry, Retry, the state fragment, escaping, and the signal rules page."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.materials.learning import material_learn
from knowledge.models import Material, SignalRule
from tests.knowledge.materials.documents import EXE

pytestmark = pytest.mark.django_db


def test_the_tab_lists_files_and_the_page_shows_state_download_and_citing_entries(client, world):
    client.force_login(world.admin)
    response = client.post(
        "/knowledge/materials/new",
        {
            "agent": "copilot",
            "scope": "shared",
            "title": "<b>Plan</b>",
            "file": SimpleUploadedFile("plan.md", b"# A\nalpha\n# B\nbeta"),
        },
    )
    material = Material.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/knowledge/materials/{material.pk}/"
    material_learn(material.pk)
    tab = client.get("/knowledge/materials/").content.decode()
    assert "Materials</a>" in tab and "&lt;b&gt;Plan&lt;/b&gt;" in tab and "<b>Plan</b>" not in tab
    page = client.get(f"/knowledge/materials/{material.pk}/").content.decode()
    assert (
        "learned" in page and f"/knowledge/materials/{material.pk}/original" in page and "Learn again" in page
    )
    assert "/knowledge/entries/" in page
    fragment = client.get(
        f"/knowledge/materials/{material.pk}/state", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert fragment.lstrip().startswith('<section id="material-state"') and "<html" not in fragment
    download = client.get(f"/knowledge/materials/{material.pk}/original")
    assert b"".join(download.streaming_content) == b"# A\nalpha\n# B\nbeta"
    assert download["X-Content-Type-Options"] == "nosniff"


def test_a_refused_type_is_shown_and_nothing_is_stored(client, world):
    client.force_login(world.admin)
    response = client.post(
        "/knowledge/materials/new",
        {"agent": "copilot", "file": SimpleUploadedFile("x.pdf", EXE)},
        follow=True,
    )
    assert "x-msdownload" in response.content.decode()
    assert not Material.objects.exists()


def test_pasted_text_opens_the_new_entry_and_is_not_listed(client, world):
    client.force_login(world.admin)
    response = client.post(
        "/knowledge/materials/new", {"agent": "copilot", "title": "Rules", "text": "Be kind."}
    )
    assert response.status_code == 302 and response["Location"].startswith("/knowledge/entries/")
    assert "Rules" not in client.get("/knowledge/materials/").content.decode().split('id="materials"')[1]


def test_retry_of_a_failed_material_queues_it_and_learned_ones_refuse_plain_retry(client, world):
    client.force_login(world.admin)
    client.post(
        "/knowledge/materials/new",
        {"agent": "copilot", "file": SimpleUploadedFile("b.pdf", b"%PDF-1.4 broken")},
    )
    material = Material.objects.get()
    material_learn(material.pk)
    assert Material.objects.get().state == "failed"
    assert "Retry" in client.get(f"/knowledge/materials/{material.pk}/").content.decode()
    client.post(f"/knowledge/materials/{material.pk}/retry")
    assert Material.objects.get().state == "queued"


def test_learn_again_with_the_original_missing_fails_at_once_with_the_reason_and_queues_nothing(
    client, world, django_capture_on_commit_callbacks
):
    """A restore without the media, a file removed by hand: the material used to sit in
    `learning` with no reason until the stuck sweep found it, ~14 minutes later."""
    from knowledge.materials.storage import material_storage

    client.force_login(world.admin)
    client.post(
        "/knowledge/materials/new",
        {"agent": "copilot", "file": SimpleUploadedFile("plan.md", b"# A\nalpha\n# B\nbeta")},
    )
    material = Material.objects.get()
    material_learn(material.pk)
    assert Material.objects.get().state == "learned"
    material_storage().delete(material.version.path)
    with django_capture_on_commit_callbacks() as queued:
        page = client.post(f"/knowledge/materials/{material.pk}/retry", {"again": "1"}, follow=True)
    assert queued == []  # no learning job
    material.refresh_from_db()
    assert material.state == "failed"
    assert material.reason.startswith("the original file (version 1) is missing from the material storage")
    html = page.content.decode()
    assert "Not queued: the original file (version 1) is missing" in html and "Learning again." not in html
    assert "Retry" in html  # once the file is back, Retry learns it


def test_materials_outside_the_reviewers_reach_are_404_and_rules_are_admin_only(client, world):
    client.force_login(world.reviewer)
    assert client.get("/knowledge/materials/999/").status_code == 404
    assert client.get("/knowledge/signal-rules/").status_code == 403
    client.force_login(world.admin)
    client.post(
        "/knowledge/signal-rules/",
        {"source": "erp", "type": "stock", "channel": "stock", "memory_scope": "shared"},
    )
    rule = SignalRule.objects.get()
    assert rule.learn is False  # the box was not ticked
    assert "erp" in client.get("/knowledge/signal-rules/").content.decode()


def test_status_shows_stuck_and_failed_learning_withdrawn_documents_and_storage(client, world, settings):
    from django.utils import timezone

    client.force_login(world.admin)
    client.post(
        "/knowledge/materials/new", {"agent": "copilot", "file": SimpleUploadedFile("a.txt", b"alpha")}
    )
    client.post(
        "/knowledge/materials/new",
        {"agent": "copilot", "file": SimpleUploadedFile("b.pdf", b"%PDF-1.4 broken")},
    )
    stuck, failed = Material.objects.order_by("pk")
    Material.objects.filter(pk=stuck.pk).update(
        state="learning", learning_started_at=timezone.now() - timezone.timedelta(hours=1)
    )
    material_learn(failed.pk)
    body = world.client("admin").get("/api/status").json()
    section = body["materials"]
    assert section["stuck_count"] == 1 and section["failed_count"] == 1
    assert section["storage_bytes"] == len(b"alpha") + len(b"%PDF-1.4 broken")
    assert any("stuck in learning" in a["text"] for a in body["alerts"])
    page = client.get("/knowledge/status/").content.decode()
    assert "Stuck in learning" in page and "Learning failed" in page
