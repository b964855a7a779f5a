"""Learning is bounded: pages, sections and characters (the rest is left out and the material
says so), decompression limits for DOCX (zip and media bombs are refused before anything is
unpacked), a memory ceiling on the process that reads an original, and a stuck-learning sweep
that queues a material again or fails it with the reason. Every bomb is built here, small."""

import io
import zipfile

import pytest
from django.utils import timezone

from knowledge.materials import extract
from knowledge.materials.services import learning_sweep
from knowledge.models import AuditEvent, Entry, Material, Memory
from tests.knowledge.materials.documents import docx_bytes, pdf_bytes
from tests.knowledge.materials.test_materials_api import learned, upload

pytestmark = pytest.mark.django_db


def _docx_with(extra: dict[str, bytes]) -> bytes:
    """A real DOCX with more files packed in (compressed), e.g. a media part."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(docx_bytes([("Refunds", "Paid in 30 days.")]))) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for item in source.infolist():
            target.writestr(item, source.read(item.filename))
        for name, data in extra.items():
            target.writestr(name, data)
    return out.getvalue()


def _material(response) -> Material:
    assert response.status_code == 201, response.content
    return Material.objects.get(pk=response.json()["material"]["id"])


def test_a_long_text_is_learned_in_part_and_the_material_says_what_was_left_out(world, settings):
    settings.BRAIN_MATERIAL_MAX_CHARS = 20_000
    text = "\n\n".join(f"## Part {i}\nLine {i} of a very long handbook. " * 3 for i in range(2_000))
    material = _material(upload(world.client("admin"), "handbook.txt", text.encode()))
    learned(material.pk)
    material.refresh_from_db()
    assert material.state == Material.LEARNED
    assert (
        "truncated: only the first 20,000 of" in material.reason
        and "BRAIN_MATERIAL_MAX_CHARS" in material.reason
    )
    entry = Entry.objects.get(properties__material=material.source_ref)
    kept = Memory.objects.filter(entry=entry).values_list("text", flat=True)
    assert sum(len(t) for t in kept) < 25_000 and not any("Part 1999" in t for t in kept)
    event = AuditEvent.objects.get(action="material.learned", object_ids=[str(material.pk)])
    assert event.data["truncated"]


def test_sections_past_the_limit_are_left_out_with_the_reason(world, settings):
    settings.BRAIN_MATERIAL_MAX_SECTIONS = 5
    text = "\n\n".join(f"# Topic {i}\nFact number {i}." for i in range(40))
    material = _material(upload(world.client("admin"), "topics.md", text.encode()))
    learned(material.pk)
    material.refresh_from_db()
    assert material.state == Material.LEARNED and material.version.sections == 5
    assert "only the first 5 of 40 sections" in material.reason


def test_a_pdf_past_the_page_limit_is_read_to_the_limit(world, settings):
    settings.BRAIN_MATERIAL_MAX_PAGES = 3
    material = _material(
        upload(world.client("admin"), "long.pdf", pdf_bytes([f"Page text {i}" for i in range(12)]))
    )
    learned(material.pk)
    material.refresh_from_db()
    assert material.state == Material.LEARNED
    assert material.version.pages == 12 and material.version.sections == 3
    assert "only the first 3 of 12 pages" in material.reason


def test_a_docx_zip_bomb_is_refused_before_it_is_unpacked(world, settings):
    settings.BRAIN_MATERIAL_MAX_UNZIPPED_MB = 5
    bomb = _docx_with({"word/media/image1.png": b"\0" * (8 * 1024 * 1024)})
    assert len(bomb) < 100_000
    material = _material(upload(world.client("admin"), "bomb.docx", bomb))
    learned(material.pk)
    material.refresh_from_db()
    assert material.state == Material.FAILED
    assert (
        "would unpack to 9 MB (at most 5 MB)" in material.reason and "decompression bomb" in material.reason
    )
    assert not Entry.objects.filter(properties__material=material.source_ref).exists()


def test_a_docx_part_compressed_past_the_ratio_is_refused(world):
    bomb = _docx_with({"word/media/image1.png": b"\0" * (3 * 1024 * 1024)})  # under 50 MB, ~1000:1
    material = _material(upload(world.client("admin"), "ratio.docx", bomb))
    learned(material.pk)
    material.refresh_from_db()
    assert material.state == Material.FAILED
    assert "word/media/image1.png in the DOCX is compressed" in material.reason


def test_reading_past_the_memory_ceiling_stops_the_child_not_the_worker():
    """The reading runs in a child process under RLIMIT_AS: 40 MB of text held to 60 MB of
    address space fails with that reason, and this process is untouched."""
    with pytest.raises(extract.Unreadable, match="more than 60 MB of memory"):
        extract.extract_bounded(extract.PLAIN, b"a" * (40 * 1024 * 1024), memory_mb=60, seconds=60)
    within = extract.extract_bounded(extract.PLAIN, b"# Fine\nA small file.", memory_mb=200, seconds=60)
    assert [(s.title, s.text) for s in within.sections] == [("Fine", "A small file.")]


def test_the_sweep_queues_a_stuck_material_again_then_fails_it_with_the_reason(world, settings):
    settings.BRAIN_MATERIAL_MAX_ATTEMPTS = 2
    material = _material(upload(world.client("admin"), "notes.txt", b"Refunds are paid within 30 days."))
    long_ago = timezone.now() - timezone.timedelta(hours=2)
    Material.objects.filter(pk=material.pk).update(
        state=Material.LEARNING, attempts=1, learning_started_at=long_ago
    )
    assert learning_sweep() == {"retried": 1, "failed": 0}
    material.refresh_from_db()
    assert material.state == Material.QUEUED
    assert material.reason == "attempt 1 did not finish within the 600 s job timeout; queued again"
    retried = AuditEvent.objects.get(action="material.retried", object_ids=[str(material.pk)])
    assert retried.data["by"] == "stuck-learning sweep"

    Material.objects.filter(pk=material.pk).update(
        state=Material.LEARNING, attempts=2, learning_started_at=long_ago
    )
    assert learning_sweep() == {"retried": 0, "failed": 1}
    material.refresh_from_db()
    assert material.state == Material.FAILED and "the last of 2 attempts" in material.reason
    assert AuditEvent.objects.filter(
        action="material.learning_failed", object_ids=[str(material.pk)]
    ).exists()
    # A material learning within the timeout is left alone.
    Material.objects.filter(pk=material.pk).update(
        state=Material.LEARNING, learning_started_at=timezone.now()
    )
    assert learning_sweep() == {"retried": 0, "failed": 0}
