"""Where originals live: Django's storage API, the `materials` storage (a FileSystemStorage
under var/media/materials by default; any backend — S3 through django-storages, say — by
setting BRAIN_MATERIAL_STORAGE and its options). Originals are written once under a path that
names the material and version and are never overwritten."""

import hashlib

from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.http import FileResponse

from knowledge.errors import Gone
from knowledge.models import Material


def material_storage():
    return storages["materials"]


def original_save(*, material_id: int, number: int, data: bytes) -> str:
    """Store one version's bytes; returns its storage path. A path that already exists (a
    write that a rolled-back transaction left behind) gets a new name from the storage, so no
    stored original is ever overwritten."""
    name = f"{material_id}/v{number}-{hashlib.sha256(data).hexdigest()[:16]}"
    return material_storage().save(name, ContentFile(data))


def original_read(path: str) -> bytes:
    with material_storage().open(path, "rb") as handle:
        return handle.read()


def original_exists(path: str) -> bool:
    return material_storage().exists(path)


def original_open(path: str):
    return material_storage().open(path, "rb")


def storage_usage(paths_sizes) -> int:
    """The bytes held by the given versions (sizes are recorded, so no storage call is made)."""
    return sum(size for _, size in paths_sizes)


def original_response(material: Material, version=None) -> FileResponse:
    """The stored bytes exactly, as an attachment that the browser must not sniff. Gone (410)
    when the material storage no longer holds them (a restore without the media, a file removed
    by hand): the material row is there, its original is not."""
    version = version or material.version
    try:
        handle = original_open(version.path)
    except FileNotFoundError:
        raise Gone(
            f"The original of material {material.pk} (version {version.number}) is missing from the "
            "material storage; restore the storage from its backup."
        ) from None
    response = FileResponse(
        handle,
        as_attachment=True,
        filename=version.filename if "." in version.filename else f"{version.filename}.{_ext(version)}",
        content_type=version.media_type,
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["ETag"] = f'"{version.sha256}"'
    return response


def _ext(version) -> str:
    return {"application/pdf": "pdf", "text/html": "html", "text/markdown": "md"}.get(
        version.media_type, "docx" if "wordprocessing" in version.media_type else "txt"
    )
