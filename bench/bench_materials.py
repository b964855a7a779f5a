"""Materials: learning throughput without a model (100 PDFs of 10 pages each, pages/s, from the
stored original to the committed entry) and the upload p95 of a 5 MB file through the API
(sniffing, sha256, storage write, rows and audit; learning is not included)."""

import shutil
import statistics
import tempfile
import time

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from rest_framework.test import APIClient

from knowledge.materials.learning import material_learn
from knowledge.materials.services import material_upload
from knowledge.models import Agent, Material
from knowledge.principal import Principal
from knowledge.principals import services
from tests.knowledge.materials.documents import pdf_bytes

PDFS, PAGES, UPLOADS = 100, 10, 30
ACTOR = Principal.system("bench")


def _page(doc: int, page: int) -> str:
    return "\n".join(
        f"Document {doc}, page {page}, line {line}: refunds are paid within {line + 10} days of the request."
        for line in range(40)
    )


def run(report) -> None:
    agent, _ = Agent.objects.get_or_create(name="bench-materials")
    folder = tempfile.mkdtemp(prefix="brain-bench-materials-")
    storages = {
        **settings.STORAGES,
        "materials": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": folder},
        },
    }
    # No job is enqueued (the bench settings run tasks inline): the benchmark runs learning
    # itself, and uploads are timed without it.
    from knowledge.materials import services as material_services

    enqueue = material_services._enqueue
    material_services._enqueue = lambda material_id: None
    try:
        with override_settings(BRAIN_EMBEDDING_KICK=False, STORAGES=storages):
            _run(report, agent)
    finally:
        material_services._enqueue = enqueue
        shutil.rmtree(folder, ignore_errors=True)


def _run(report, agent) -> None:
    ids = []
    for doc in range(PDFS):
        data = pdf_bytes([_page(doc, p) for p in range(PAGES)])
        ids.append(
            material_upload(actor=ACTOR, owner=agent, store="shared", filename=f"doc{doc}.pdf", data=data).pk
        )
    start = time.perf_counter()
    for material_id in ids:
        outcome = material_learn(material_id)
        assert outcome == "learned", (outcome, Material.objects.get(pk=material_id).reason)
    spent = time.perf_counter() - start
    learned = Material.objects.filter(pk__in=ids, state=Material.LEARNED).count()
    report(
        f"learning without a model, {PDFS} PDFs × {PAGES} pages",
        PDFS * PAGES / spent,
        "pages/s",
        note=f"{learned} learned in {spent:.1f} s; one entry of {PAGES} blocks each",
    )

    user = services.consoleuser_create(
        actor=ACTOR, username="materials-bench-admin", role="admin", password="bench-pass-1"
    )
    token = services.token_create(actor=ACTOR, user=user)
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    big = ("Refunds are paid within 30 days. " * 160_000).encode()[: 5 * 1024 * 1024]
    times = []
    for i in range(UPLOADS):
        body = big[:-8] + f"{i:08d}".encode()
        start = time.perf_counter()
        response = client.post(
            "/api/materials",
            {"file": SimpleUploadedFile(f"big{i}.txt", body), "agent": agent.name, "scope": "shared"},
            format="multipart",
        )
        times.append(time.perf_counter() - start)
        assert response.status_code == 201, response.content[:200]
    p95 = statistics.quantiles(times, n=20)[-1]
    report(
        "upload of a 5 MB file (API, stored, queued)",
        p95 * 1000,
        "ms p95",
        note=f"median {statistics.median(times) * 1000:.0f} ms over {UPLOADS} uploads",
    )
