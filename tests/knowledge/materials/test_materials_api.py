"""Materials over HTTP: upload and paste, refusals that store nothing, learning without a model
(one entry per material citing its sections), retry and learn-once after a dead worker, the
original's download, store visibility, connector versions and withdrawal."""

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.materials import learning
from knowledge.materials.services import learning_claim
from knowledge.models import AuditEvent, Entry, Material, MaterialVersion, Memory, MemorySource
from tests.knowledge.materials.documents import EXE, docx_bytes, pdf_bytes

pytestmark = pytest.mark.django_db


def upload(client, name, data, *, agent="copilot", scope="shared", **extra):
    return client.post(
        "/api/materials",
        {"file": SimpleUploadedFile(name, data), "agent": agent, "scope": scope, **extra},
        format="multipart",
    )


def learned(material_id):
    """Run the learning job as the worker would (tests run tasks inline, but on_commit does not
    fire inside a test transaction)."""
    return learning.material_learn(material_id)


def entry_of(material):
    return Entry.objects.get(properties__material=material.source_ref)


FILES = {
    "notes.txt": b"Refunds are paid within 30 days.\n\n## Office\nThe office is in Lisbon.",
    "guide.md": b"# Refunds\nRefunds are paid within 30 days.\n\n# Office\nThe office is in Lisbon.",
    "page.html": b"<html><body><h1>Refunds</h1><p>Refunds are paid within 30 days.</p>"
    b"<script>alert(1)</script><h2>Office</h2><p>The office is in Lisbon.</p></body></html>",
    "policy.pdf": pdf_bytes(["Refunds are paid within 30 days.", "The office is in Lisbon."]),
    "policy.docx": docx_bytes(
        [("Refunds", "Refunds are paid within 30 days."), ("Office", "The office is in Lisbon.")]
    ),
}
TYPES = {
    "notes.txt": "text/plain",
    "guide.md": "text/markdown",
    "page.html": "text/html",
    "policy.pdf": "application/pdf",
    "policy.docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}


@pytest.mark.parametrize("name", list(FILES))
def test_each_file_type_is_stored_then_learned_into_one_entry_citing_its_sections(world, name):
    response = upload(world.client("admin"), name, FILES[name])
    assert response.status_code == 201, response.json()
    body = response.json()["material"]
    assert body["state"] == "queued"
    assert body["version"]["media_type"] == TYPES[name]
    assert body["version"]["sha256"] == hashlib.sha256(FILES[name]).hexdigest()

    assert learned(body["id"]) == "learned", Material.objects.get(pk=body["id"]).reason
    material = Material.objects.get(pk=body["id"])
    assert material.state == Material.LEARNED and material.attempts == 1
    assert "without a model" in material.reason
    entry = entry_of(material)
    blocks = list(Memory.objects.filter(entry=entry, status="active").order_by("position"))
    assert len(blocks) == 2
    assert "30 days" in blocks[0].text and "Lisbon" in blocks[1].text
    assert "alert" not in " ".join(b.text for b in blocks)
    refs = [list(b.sources.values_list("kind", "ref")) for b in blocks]
    assert refs == [[("material", f"{material.pk}#1")], [("material", f"{material.pk}#2")]]
    # the section refs are tracked (fingerprinted), not untracked
    assert set(MemorySource.objects.filter(kind="material").values_list("state", flat=True)) == {"unchanged"}


def test_an_upload_over_the_size_limit_is_refused_and_nothing_is_stored(world, settings):
    settings.BRAIN_MATERIAL_MAX_MB = 20
    big = b"a" * (21 * 1024 * 1024)
    response = upload(world.client("admin"), "big.txt", big)
    assert response.status_code == 413  # refused before any view reads the body
    assert response.json()["max_body_bytes"] == 21 * 1024 * 1024
    just_over = upload(world.client("admin"), "big.txt", b"a" * (20 * 1024 * 1024 + 1))
    assert just_over.status_code == 413  # within the envelope: the service refuses it
    assert "20 MB" in just_over.json()["error"]
    assert not Material.objects.exists() and not MaterialVersion.objects.exists()


def test_an_exe_renamed_pdf_is_refused_from_its_bytes_and_nothing_is_stored(world):
    response = upload(world.client("admin"), "invoice.pdf", EXE)
    assert response.status_code == 400
    assert "x-msdownload" in str(response.json()["fields"]["file"])
    assert not Material.objects.exists()


def test_a_worker_killed_mid_learning_leaves_it_learning_and_a_retry_learns_once(
    world, monkeypatch, settings
):
    material_id = upload(world.client("admin"), "policy.pdf", FILES["policy.pdf"]).json()["material"]["id"]
    real = learning.learn_plain

    def killed(*args, **kwargs):
        real(*args, **kwargs)  # the entry is written …
        raise KeyboardInterrupt  # … and the worker dies before the transaction commits

    monkeypatch.setattr(learning, "learn_plain", killed)
    with pytest.raises(KeyboardInterrupt):
        learned(material_id)
    material = Material.objects.get(pk=material_id)
    assert material.state == Material.LEARNING and material.attempts == 1
    assert not Entry.objects.exists()

    monkeypatch.setattr(learning, "learn_plain", real)
    # a second delivery of the job while the first could still be alive takes nothing
    assert learned(material_id).startswith("not claimed")
    retry = world.client("admin").post(f"/api/materials/{material_id}/retry", {}, format="json")
    assert retry.status_code == 409  # not stuck yet: within the job timeout
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 0}
    retry = world.client("admin").post(f"/api/materials/{material_id}/retry", {}, format="json")
    assert retry.status_code == 200 and retry.json()["state"] == "queued"
    assert learned(material_id) == "learned"
    assert learned(material_id).startswith("not claimed")  # a duplicate delivery writes nothing
    assert Entry.objects.count() == 1
    assert Material.objects.get(pk=material_id).attempts == 2


def test_an_older_attempt_that_wakes_up_after_a_takeover_writes_nothing(world, settings):
    material_id = upload(world.client("admin"), "notes.txt", FILES["notes.txt"]).json()["material"]["id"]
    first = learning_claim(material_id)
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 0}
    assert learned(material_id) == "learned"  # took the stuck claim over
    from knowledge.materials.extract import Extracted, Section

    wrote = learning.learning_commit(
        material_id=material_id,
        attempt=first,
        extracted=Extracted(sections=[Section(title="x", text="y")]),
        job="plain/1",
        write=lambda m, v: learning.learn_plain(m, v, Extracted(sections=[Section(title="x", text="y")])),
    )
    assert wrote is False
    assert Memory.objects.filter(entry__isnull=False).count() == 2


def test_an_unreadable_pdf_fails_with_its_reason_writes_nothing_and_retry_reuses_the_original(world):
    broken = b"%PDF-1.7\n" + b"garbage" * 100
    material_id = upload(world.client("admin"), "broken.pdf", broken).json()["material"]["id"]
    assert learned(material_id).startswith("failed")
    material = Material.objects.get(pk=material_id)
    assert material.state == Material.FAILED and "PDF could not be read" in material.reason
    assert not Entry.objects.exists()
    assert AuditEvent.objects.filter(action="material.learning_failed").count() == 1
    retry = world.client("admin").post(f"/api/materials/{material_id}/retry", {}, format="json")
    assert retry.status_code == 200
    assert learned(material_id).startswith("failed")
    assert Material.objects.get(pk=material_id).attempts == 2
    assert MaterialVersion.objects.filter(material_id=material_id).count() == 1


def test_learn_again_replaces_the_entry_blocks_without_a_second_entry(world):
    client = world.client("admin")
    material_id = upload(client, "guide.md", FILES["guide.md"]).json()["material"]["id"]
    learned(material_id)
    assert client.post(f"/api/materials/{material_id}/retry", {}, format="json").status_code == 409
    assert (
        client.post(f"/api/materials/{material_id}/retry", {"again": True}, format="json").status_code == 200
    )
    learned(material_id)
    assert Entry.objects.count() == 1
    assert Memory.objects.filter(entry__isnull=False, status="active").count() == 2


def test_download_returns_the_stored_bytes_exactly_as_an_attachment(world):
    client = world.client("admin")
    data = FILES["policy.pdf"]
    material_id = upload(client, "policy.pdf", data).json()["material"]["id"]
    response = client.get(f"/api/materials/{material_id}/original")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(data).hexdigest()
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Type"] == "application/pdf"


def test_a_material_whose_stored_original_is_missing_answers_410_json(world, client):
    """A restored database without the media directory: the material is listed, its original
    is gone. The download used to be an HTML 500."""
    from knowledge.materials.storage import material_storage

    admin = world.client("admin")
    material_id = upload(admin, "policy.pdf", FILES["policy.pdf"]).json()["material"]["id"]
    material_storage().delete(Material.objects.get(pk=material_id).version.path)
    response = admin.get(f"/api/materials/{material_id}/original")
    assert response.status_code == 410 and response["Content-Type"] == "application/json"
    assert f"material {material_id} " in response.json()["error"] and "missing" in response.json()["error"]
    client.force_login(world.admin)
    page = client.get(f"/knowledge/materials/{material_id}/original")
    assert page.status_code == 410 and b"missing" in page.content


def test_a_queued_material_whose_original_went_missing_fails_with_the_reason_not_learning(world):
    from knowledge.materials.storage import material_storage

    admin = world.client("admin")
    material_id = upload(admin, "notes.txt", FILES["notes.txt"]).json()["material"]["id"]
    material_storage().delete(Material.objects.get(pk=material_id).version.path)
    assert learned(material_id).startswith("failed: the original file (version 1) is missing")
    body = admin.get(f"/api/materials/{material_id}").json()["material"]
    assert body["state"] == "failed" and "missing from the material storage" in body["reason"]
    # Retry through the API says the same at once, and queues nothing.
    retry = admin.post(f"/api/materials/{material_id}/retry", {}, format="json")
    assert retry.status_code == 200 and retry.json()["state"] == "failed"
    assert "missing from the material storage" in retry.json()["reason"]


def test_pasted_text_and_web_content_become_an_entry_at_once_citing_the_material(world):
    client = world.client("admin")
    response = client.post(
        "/api/materials",
        {
            "title": "Holiday rules",
            "text": "Staff get 25 days of holiday.",
            "agent": "copilot",
            "scope": "shared",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    entry = Entry.objects.get(pk=body["entry"])
    block = Memory.objects.get(entry=entry)
    assert "25 days" in block.text
    assert list(block.sources.values_list("ref", flat=True)) == [f"{body['material']['id']}#1"]
    html = client.post(
        "/api/materials",
        {"title": "Web page", "html": "<h1>Lunch</h1><p>Lunch is at noon.</p>", "agent": "copilot"},
        format="json",
    )
    assert html.status_code == 201
    assert "noon" in Memory.objects.get(entry_id=html.json()["entry"]).text
    both = client.post(
        "/api/materials", {"title": "x", "text": "a", "html": "<p>b</p>", "agent": "copilot"}, format="json"
    )
    assert both.status_code == 400
    assert Material.objects.count() == 2


def test_materials_follow_store_visibility_for_two_agents(world):
    admin = world.client("admin")
    own = upload(admin, "notes.txt", FILES["notes.txt"], agent="copilot", scope="agent").json()["material"][
        "id"
    ]
    shared = upload(admin, "guide.md", FILES["guide.md"], agent="copilot", scope="shared").json()["material"][
        "id"
    ]
    scribe = world.client("scribe")
    assert [m["id"] for m in scribe.get("/api/materials").json()["results"]] == [shared]
    assert scribe.get(f"/api/materials/{own}").status_code == 404
    assert scribe.get(f"/api/materials/{own}/original").status_code == 404
    copilot = world.client("copilot")
    assert {m["id"] for m in copilot.get("/api/materials").json()["results"]} == {own, shared}
    assert copilot.get(f"/api/materials/{own}/original").status_code == 200
    # an agent asks only itself to learn
    assert upload(scribe, "x.txt", b"hello", agent="copilot").status_code == 403
    assert world.client("integration").get("/api/materials").status_code == 403


def _grant(world, agent="copilot", scope="shared", integration="tickets"):
    """An admin lets the integration mirror documents into the agent's store."""
    from knowledge.materials.grants import connector_grant_add
    from knowledge.principal import Principal

    admin = Principal(kind="person", name="tests", role="admin")
    return connector_grant_add(actor=admin, integration=integration, agent=agent, scope=scope)


def _put(client, version, content, ref="KB-7", **extra):
    return client.put(
        f"/api/connectors/wiki/documents/{ref}",
        {"title": "Refund policy", "version": version, "content": content, "agent": "copilot", **extra},
        format="json",
    )


def test_a_connector_version_change_makes_citing_memories_stale_and_an_unchanged_version_does_not(world):
    from tests.factory import make_memory

    _grant(world)
    client = world.client("integration")
    created = _put(client, "v1", "Refunds are paid within 30 days.")
    assert created.status_code == 201 and created.json()["outcome"] == "created"
    material_id = created.json()["material"]["id"]
    learned(material_id)
    memory = make_memory(
        world.copilot,
        "Refunds take 30 days.",
        store="shared",
        sources=[{"kind": "material", "ref": "wiki:KB-7"}],
    )
    assert memory.sources.get().state == "unchanged"

    same = _put(client, "v1", "Refunds are paid within 30 days.")
    assert same.status_code == 200 and same.json()["outcome"] == "unchanged"
    memory.refresh_from_db()
    assert not memory.stale
    assert MaterialVersion.objects.filter(material_id=material_id).count() == 1

    changed = _put(client, "v2", "Refunds are paid within 14 days.")
    assert changed.json()["outcome"] == "updated"
    memory.refresh_from_db()
    assert memory.stale and "wiki:KB-7 changed" in memory.stale_reason
    # the learned entry's blocks cited the old version's sections: stale too
    assert Memory.objects.filter(entry__isnull=False, stale=True).count() == 1
    versions = list(MaterialVersion.objects.filter(material_id=material_id).values_list("label", flat=True))
    assert versions == ["v1", "v2"]  # the old version is kept for lineage
    assert Material.objects.get(pk=material_id).state == Material.QUEUED
    learned(material_id)
    assert "14 days" in Memory.objects.get(entry__isnull=False, status="active").text


def test_withdrawal_keeps_the_mirror_marks_it_and_makes_dependants_stale(world):
    from tests.factory import make_memory

    _grant(world)
    client = world.client("integration")
    material_id = _put(client, "v1", "Stock is checked daily.", ref="KB-9").json()["material"]["id"]
    memory = make_memory(
        world.copilot,
        "Stock is checked daily.",
        store="shared",
        sources=[{"kind": "material", "ref": "wiki:KB-9"}],
    )
    gone = client.delete("/api/connectors/wiki/documents/KB-9")
    assert gone.status_code == 200 and gone.json()["material"]["withdrawn"] is True
    memory.refresh_from_db()
    assert memory.stale and "was deleted" in memory.stale_reason
    assert Material.objects.filter(pk=material_id).exists()
    assert (
        world.client("admin").post(f"/api/materials/{material_id}/retry", {}, format="json").status_code
        == 409
    )
    lost = _put(client, "v1", "x", ref="KB-10")
    assert lost.status_code == 201
    assert _put(client, "v1", "x", ref="KB-10", access="lost").json()["outcome"] == "withdrawn"
    assert (
        world.client("copilot")
        .put(
            "/api/connectors/wiki/documents/KB-11",
            {"title": "t", "version": "1", "content": "x", "agent": "copilot"},
            format="json",
        )
        .status_code
        == 403
    )
