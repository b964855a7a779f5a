"""Every write of materials: storing an original (upload, paste, connector mirror), queueing and
retrying learning, new connector versions and withdrawal. Each service is one transaction with
its audit event; the learning job is enqueued after commit, so a rolled-back write starts
nothing. The original is stored before learning starts and never overwritten: a changed
document is a new MaterialVersion."""

import hashlib

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.errors import Conflict, DomainError, Invalid, NotFound
from knowledge.materials import extract
from knowledge.materials.plain import learn_plain
from knowledge.materials.storage import original_exists, original_save
from knowledge.models import Agent, Material, MaterialVersion
from knowledge.principal import Principal
from knowledge.signals import material_changed

LEARN_TASK = "knowledge.materials.tasks.material_learn"


class TooLarge(DomainError):
    """The original is over BRAIN_MATERIAL_MAX_MB (413)."""

    status_code = 413
    code = "too_large"


def max_bytes() -> int:
    return settings.BRAIN_MATERIAL_MAX_MB * 1024 * 1024


def extract_limits() -> extract.Limits:
    """What one material may cost to read (knowledge.materials.extract), from the settings."""
    return extract.Limits(
        pages=settings.BRAIN_MATERIAL_MAX_PAGES,
        sections=settings.BRAIN_MATERIAL_MAX_SECTIONS,
        chars=settings.BRAIN_MATERIAL_MAX_CHARS,
        unzipped_bytes=settings.BRAIN_MATERIAL_MAX_UNZIPPED_MB * 1024 * 1024,
    )


def job_timeout_seconds() -> int:
    """How long one learning job may run before it counts as stuck (the worker's task timeout)."""
    timeout = settings.Q_CLUSTER.get("timeout")
    return 600 if timeout is None else int(timeout)


def who(actor: Principal) -> str:
    return f"{actor.kind_label}:{actor.name}"


def _check_size(data: bytes, field: str) -> None:
    if len(data) > max_bytes():
        raise TooLarge(
            f"{field}: the original is {len(data):,} bytes; at most {settings.BRAIN_MATERIAL_MAX_MB} MB "
            f"(BRAIN_MATERIAL_MAX_MB) are learned.",
            max_bytes=max_bytes(),
        )


def _sniff(data: bytes, filename: str, field: str) -> str:
    try:
        return extract.sniff(data, filename)
    except extract.Refused as exc:
        raise Invalid({field: str(exc)}) from None


def _new_version(material: Material, *, actor, data: bytes, filename: str, media_type: str, label: str = ""):
    previous = material.versions.order_by("-number").values_list("number", "sections").first() or (0, 0)
    number = previous[0] + 1
    path = original_save(material_id=material.pk, number=number, data=data)
    version = MaterialVersion.objects.create(
        material=material,
        number=number,
        label=label,
        path=path,
        filename=(filename or "original")[:255],
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        media_type=media_type,
        # The sections of the version before stay citable refs (changed, not gone) until this
        # one is learned and cut.
        sections=previous[1],
        created_by=who(actor),
    )
    material.version = version
    return version


def _enqueue(material_id: int) -> None:
    from django_q.tasks import async_task

    transaction.on_commit(
        lambda: async_task(LEARN_TASK, material_id, task_name=f"learn material {material_id}")
    )


def _audit(action, *, actor, material, reason="", data=None):
    return audit_record(
        action,
        actor=actor,
        store=material.store,
        owner=material.owner.name,
        object_type="material",
        object_ids=[material.pk],
        reason=reason,
        data={"ref": material.source_ref, **(data or {})},
    )


def material_upload(
    *, actor: Principal, owner: Agent, store: str, filename: str, data: bytes, title: str = ""
) -> Material:
    """Store an uploaded file for `owner` to learn in `store` and queue its learning. Refuses
    (writing nothing) a file over the size limit (413) and any type, judged from its bytes, that
    is not plain text, Markdown, HTML, PDF or DOCX (400)."""
    access.check_write(actor, owner=owner, store=store)
    _check_size(data, "file")
    media_type = _sniff(data, filename, "file")
    title = (title or filename or "Untitled material").strip()[:300]
    with transaction.atomic():
        material = Material.objects.create(
            kind=Material.FILE,
            title=title,
            owner=owner,
            store=store,
            state=Material.QUEUED,
            asked_by=who(actor),
        )
        version = _new_version(material, actor=actor, data=data, filename=filename, media_type=media_type)
        material.save(update_fields=["version"])
        _audit(
            "material.stored",
            actor=actor,
            material=material,
            data={"version": version.number, "sha256": version.sha256, "size": version.size},
        )
        _enqueue(material.pk)
    return material


def material_paste(
    *, actor: Principal, owner: Agent, store: str, title: str, text: str = "", html: str = ""
) -> Material:
    """Pasted text or web content (HTML) becomes a knowledge entry at once, in this transaction:
    the paste is kept as a material (so the entry can cite it) and learned without a model, one
    entry whose blocks are its sections. Web content without a `title` is titled by its own
    (<title>, else its first <h1>). Returns the material with `entry` set."""
    if bool(text) == bool(html):
        raise Invalid({"text": "Send either text or html."})
    access.check_write(actor, owner=owner, store=store)
    data = (text or html).encode()
    _check_size(data, "text" if text else "html")
    media_type = extract.PLAIN if text else extract.HTML
    extracted = extract.extract(media_type, data, extract_limits())
    if not extracted.sections:
        raise Invalid({"text" if text else "html": "There is no text to learn."})
    title = (title or "").strip() or extracted.title
    if not title:
        raise Invalid(
            {"title": "Give a title: the pasted text has none."}
            if text
            else {"title": "Give a title: the page has no <title> or <h1>."}
        )
    with transaction.atomic():
        material = Material.objects.create(
            kind=Material.TEXT if text else Material.WEB,
            title=title[:300],
            owner=owner,
            store=store,
            state=Material.LEARNING,
            attempts=1,
            learning_started_at=timezone.now(),
            asked_by=who(actor),
        )
        version = _new_version(material, actor=actor, data=data, filename="pasted", media_type=media_type)
        material.save(update_fields=["version"])
        _audit("material.stored", actor=actor, material=material, data={"version": version.number})
        version.sections = len(extracted.sections)
        version.save(update_fields=["sections"])
        entry = learn_plain(material, version, extracted)
        _learned(
            material, version, extracted, job="plain/1", counts=entry.counts, note="pasted: learned at once"
        )
    material.entry = entry
    return material


def _learned(
    material: Material, version: MaterialVersion, extracted, *, job: str, counts=None, note: str = ""
) -> None:
    """Inside the learning transaction: the material is learned (`note` says how, e.g. why
    no model was used)."""
    version.sections, version.pages = len(extracted.sections), extracted.pages
    version.save(update_fields=["sections", "pages"])
    if extracted.truncated:  # learned in part: the material says what was left out
        note = "; ".join(
            [note, "truncated: " + "; ".join(extracted.truncated)] if note else extracted.truncated
        )
    material.state, material.reason, material.learned_at = Material.LEARNED, note[:2000], timezone.now()
    material.learned_with = job
    material.save(update_fields=["state", "reason", "learned_at", "learned_with", "updated_at"])
    audit_record(
        "material.learned",
        actor=Principal.system("materials"),
        store=material.store,
        owner=material.owner.name,
        object_type="material",
        object_ids=[material.pk],
        counts={"sections": len(extracted.sections), **(counts or {})},
        data={
            "truncated": extracted.truncated,
            "ref": material.source_ref,
            "version": version.number,
            "job": job,
            "attempt": material.attempts,
        },
    )


def original_missing(version: MaterialVersion) -> str:
    """Why a version cannot be learned because its bytes are gone (a restore without the media,
    a file removed by hand)."""
    return (
        f"the original file (version {version.number}) is missing from the material storage; "
        "restore the storage from its backup, or add the file again"
    )


def material_retry(*, actor: Principal, material: Material, again: bool = False) -> Material:
    """Learn the stored original again: **Retry** for a failed material or one stuck in learning
    past the job timeout; **Learn again** (`again`) for a learned one. Anything else is a 409.
    An original missing from the storage fails the material at once with that reason and queues
    nothing (the job could only fail later); the caller reads the returned state."""
    with transaction.atomic():
        material = (
            Material.objects.select_for_update(of=("self",))
            .select_related("owner", "version")
            .get(pk=material.pk)
        )
        stuck = (
            material.state == Material.LEARNING
            and material.learning_started_at is not None
            and (
                material.learning_started_at
                < timezone.now() - timezone.timedelta(seconds=job_timeout_seconds())
            )
        )
        allowed = {Material.FAILED, Material.STORED} | ({Material.LEARNED} if again else set())
        if material.withdrawn:
            raise Conflict(f"Material {material.pk} was withdrawn by its connector; it is not learned.")
        if material.kind in (Material.TEXT, Material.WEB):
            raise Conflict("Pasted text and web content were learned when pasted; edit the entry instead.")
        if not (material.state in allowed or stuck or (again and material.state == Material.FAILED)):
            if material.state == Material.LEARNED:
                raise Conflict(f"Material {material.pk} is learned; use Learn again.", state=material.state)
            raise Conflict(
                f"Material {material.pk} is {material.state}; only a failed material, or one stuck in "
                "learning past the job timeout, is retried.",
                state=material.state,
            )
        previous = material.state
        missing = material.version is not None and not original_exists(material.version.path)
        if missing:
            # Recorded, not refused: the material's state should say why it cannot be learned
            # (it would otherwise keep its old state, or sit in `learning` until the sweep).
            material.state, material.reason = Material.FAILED, original_missing(material.version)
        else:
            material.state, material.reason = Material.QUEUED, ""
        material.save(update_fields=["state", "reason", "updated_at"])
        _audit(
            "material.learn_again" if again else "material.retried",
            actor=actor,
            material=material,
            reason=material.reason,
            data={"was": previous, "attempts": material.attempts, "queued": not missing},
        )
        if not missing:
            _enqueue(material.pk)
    return material


# --- connectors ------------------------------------------------------------------------------


def connector_document_put(
    *,
    actor: Principal,
    connector: str,
    ref: str,
    owner: Agent,
    store: str,
    title: str,
    version: str,
    data: bytes,
    filename: str = "",
) -> tuple[Material, str]:
    """Create or update the read-only mirror of an external document. Returns (material,
    outcome): `created`, `updated` (a new version: the old one is kept for lineage, the
    memories citing the document go stale by the invalidation mode, the new version is
    queued for learning), `restored` (a withdrawn document is back) or `unchanged` (same
    version and bytes: nothing is written). An integration writes only into a store it was
    granted and only its own documents (`access.check_connector_write`)."""
    access.check_connector_write(actor, owner=owner, store=store)
    _check_size(data, "content")
    media_type = _sniff(data, filename, "content")
    sha = hashlib.sha256(data).hexdigest()
    with transaction.atomic():
        material = (
            Material.objects.select_for_update(of=("self",))
            .select_related("owner", "version")
            .filter(connector=connector, external_ref=ref)
            .first()
        )
        if material is None:
            material = Material.objects.create(
                kind=Material.CONNECTOR,
                connector=connector,
                external_ref=ref,
                title=title[:300],
                owner=owner,
                store=store,
                state=Material.QUEUED,
                asked_by=who(actor),
                integration=actor.integration if actor.is_integration else None,
            )
            v = _new_version(
                material, actor=actor, data=data, filename=filename, media_type=media_type, label=version
            )
            material.save(update_fields=["version"])
            _audit(
                "material.mirrored",
                actor=actor,
                material=material,
                data={"version": v.number, "label": version},
            )
            _enqueue(material.pk)
            return material, "created"
        access.check_connector_write(actor, document=material)
        if (material.owner_id, material.store) != (owner.pk, store):
            raise Conflict(
                f"{connector}:{ref} is mirrored for agent {material.owner.name} in store {material.store}; "
                "a mirror never moves across a visibility boundary.",
            )
        current = material.version
        same = current is not None and current.label == version and current.sha256 == sha
        if same and not material.withdrawn:
            return material, "unchanged"
        outcome = "restored" if same else "updated"
        if not same:
            _new_version(
                material, actor=actor, data=data, filename=filename, media_type=media_type, label=version
            )
        material.withdrawn_at, material.title = None, (title or material.title)[:300]
        material.state, material.reason = Material.QUEUED, ""
        material.save(update_fields=["version", "withdrawn_at", "title", "state", "reason", "updated_at"])
        _audit(
            "material.mirrored",
            actor=actor,
            material=material,
            data={"version": material.version.number, "label": version, "outcome": outcome},
        )
        material_changed.send(sender=Material, actor=actor, refs=[material.source_ref])
        _enqueue(material.pk)
        return material, outcome


def connector_document_withdraw(*, actor: Principal, connector: str, ref: str) -> Material:
    """The external document is gone or access to it was lost: the mirror is kept, marked
    withdrawn (never learned again), and the memories citing it go stale. An integration
    withdraws only documents it mirrored."""
    with transaction.atomic():
        material = (
            Material.objects.select_for_update(of=("self",))
            .select_related("owner")
            .filter(connector=connector, external_ref=ref)
            .first()
        )
        if material is None:
            raise NotFound(f"No document {ref} of connector {connector} is mirrored.")
        access.check_connector_write(actor, document=material)
        if material.withdrawn:
            return material
        material.withdrawn_at = timezone.now()
        material.save(update_fields=["withdrawn_at", "updated_at"])
        _audit("material.withdrawn", actor=actor, material=material)
        material_changed.send(sender=Material, actor=actor, refs=[material.source_ref])
    return material


# --- the learning job's claim -----------------------------------------------------------------


def learning_claim(material_id: int, *, now=None) -> int | None:
    """Take a queued material (or one whose learning worker died: learning past the job timeout)
    by a conditional update; returns this attempt's number, or None when another worker holds it
    or there is nothing to learn."""
    now = now or timezone.now()
    stale = now - timezone.timedelta(seconds=job_timeout_seconds())
    won = (
        Material.objects.filter(pk=material_id, withdrawn_at__isnull=True)
        .filter(Q(state=Material.QUEUED) | Q(state=Material.LEARNING, learning_started_at__lt=stale))
        .update(state=Material.LEARNING, attempts=F("attempts") + 1, learning_started_at=now, updated_at=now)
    )
    if not won:
        return None
    return Material.objects.filter(pk=material_id).values_list("attempts", flat=True).first()


def learning_fail(material_id: int, attempt: int, reason: str) -> bool:
    """This attempt failed: the material is failed with the reason (nothing else was written).
    A no-op when another attempt has taken over."""
    with transaction.atomic():
        material = (
            Material.objects.select_for_update(of=("self",)).select_related("owner").get(pk=material_id)
        )
        if material.state != Material.LEARNING or material.attempts != attempt:
            return False
        material.state, material.reason = Material.FAILED, reason[:2000]
        material.save(update_fields=["state", "reason", "updated_at"])
        audit_record(
            "material.learning_failed",
            actor=Principal.system("materials"),
            store=material.store,
            owner=material.owner.name,
            object_type="material",
            object_ids=[material.pk],
            reason=reason[:2000],
            data={"ref": material.source_ref, "attempt": attempt},
        )
    return True


def learning_defer(material_id: int, attempt: int, reason: str, *, deferrals: int) -> bool:
    """The model server did not answer this attempt (knowledge.llm.outage): nothing was
    written; the material is queued again, the attempt not counted, saying why, and learned
    after the back-off from the same stored original. A no-op when another attempt took over."""
    from knowledge.llm import defer_later, deferred_reason

    with transaction.atomic():
        material = (
            Material.objects.select_for_update(of=("self",)).select_related("owner").get(pk=material_id)
        )
        if material.state != Material.LEARNING or material.attempts != attempt:
            return False
        at = defer_later(
            LEARN_TASK, material_id, deferrals=deferrals + 1, what=f"learn material {material_id}"
        )
        material.state, material.attempts = Material.QUEUED, attempt - 1
        material.reason = f"{deferred_reason(reason)}; learned from {at:%Y-%m-%d %H:%M:%S} UTC"[:2000]
        material.save(update_fields=["state", "attempts", "reason", "updated_at"])
        _audit(
            "material.learning_deferred",
            actor=Principal.system("materials"),
            material=material,
            reason=material.reason,
            data={"attempt": attempt, "deferrals": deferrals + 1},
        )
    return True


# --- the stuck-learning sweep -----------------------------------------------------------------

SWEEP_ACTOR = Principal.system("materials")


def learning_sweep(*, now=None) -> dict:
    """Every few minutes: a material still `learning` past the job timeout lost its job (the
    worker died, or the job ran into its timeout). It is queued again, with the reason, while it
    has had fewer than BRAIN_MATERIAL_MAX_ATTEMPTS attempts; after that it is failed with the
    reason (Retry still works). One transaction per material; returns the counts."""
    now = now or timezone.now()
    timeout = job_timeout_seconds()
    counts = {"retried": 0, "failed": 0}
    stuck_ids = list(
        Material.objects.filter(
            state=Material.LEARNING, learning_started_at__lt=now - timezone.timedelta(seconds=timeout)
        ).values_list("pk", flat=True)[:100]
    )
    for pk in stuck_ids:
        with transaction.atomic():
            material = (
                Material.objects.select_for_update(of=("self",), skip_locked=True)
                .select_related("owner")
                .filter(pk=pk, state=Material.LEARNING)
                .first()
            )
            if material is None:
                continue  # taken over (or finished) since it was listed
            what = f"attempt {material.attempts} did not finish within the {timeout} s job timeout"
            if material.attempts < settings.BRAIN_MATERIAL_MAX_ATTEMPTS:
                material.state, material.reason = Material.QUEUED, f"{what}; queued again"
                action, key = "material.retried", "retried"
                _enqueue(material.pk)
            else:
                material.state = Material.FAILED
                material.reason = (
                    f"{what}, the last of {material.attempts} attempts: the original is probably too large "
                    "or too complex to read in time (BRAIN_MATERIAL_MAX_PAGES, _SECTIONS, _CHARS bound it)"
                )
                action, key = "material.learning_failed", "failed"
            material.save(update_fields=["state", "reason", "updated_at"])
            _audit(
                action,
                actor=SWEEP_ACTOR,
                material=material,
                reason=material.reason,
                data={"was": Material.LEARNING, "attempts": material.attempts, "by": "stuck-learning sweep"},
            )
            counts[key] += 1
    return counts
