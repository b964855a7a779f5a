"""The learning job: claim a material, read its stored original, extract and cut it into
sections, and write what it teaches in ONE transaction that also marks it learned.

With a model (a learner registered by a higher layer — curation's, which uses Dreaming stage
B's operation schema and rules — and the light model available for the material's agent), the
model proposes focused entries; without one, the material becomes one entry whose blocks are
its sections, each citing `<material>#<section>`. Either way:

- a failure (unreadable original, model failure, invalid reply, database error) writes nothing
  and marks the material failed with its reason; Retry runs it again on the stored original;
- an outage (the model server does not answer: LearnDeferred, knowledge.llm.outage) is not a
  failure: nothing is written, the material is queued again and learned after a back-off;
- learning happens once per claim: the write transaction locks the material and checks that it
  is still this attempt's, so a worker that died mid-learning (its material left `learning`)
  and the retry that took it over never both write."""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, transaction

from knowledge.materials import extract
from knowledge.materials.plain import learn_plain
from knowledge.materials.services import (
    _learned,
    extract_limits,
    learning_claim,
    learning_defer,
    learning_fail,
    original_missing,
)
from knowledge.materials.storage import original_read
from knowledge.models import Material

PLAIN_JOB = "plain/1"


class LearnFailed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class LearnDeferred(Exception):
    """The model server does not answer (an outage): learning waits, it does not fail nor fall
    back to learning plainly."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Learner:
    """A model-backed learner: `unavailable(material)` says why it cannot run now ("" when it
    can); `learn(material, version, extracted, attempt)` calls the model, checks the reply and
    writes through `learning_commit`, raising LearnFailed with a reason. Either raises
    LearnDeferred when its model server does not answer."""

    job: str
    unavailable: Callable[[Material], str]
    learn: Callable[..., None]


_learners: list[Learner] = []


def learner_register(learner: Learner) -> None:
    """Called from a higher layer's AppConfig.ready (this layer may not import it)."""
    _learners[:] = [x for x in _learners if x.job != learner.job] + [learner]


def learner_for(material: Material) -> tuple[Learner | None, str]:
    """(the model learner to use, or None and why not)."""
    if not _learners:
        return None, "no model-backed learner is installed"
    learner = _learners[-1]
    why = learner.unavailable(material)
    return (None, why) if why else (learner, "")


def learning_commit(
    *, material_id: int, attempt: int, extracted: extract.Extracted, job: str, write, note: str = ""
) -> bool:
    """Run `write(material, version)` (returning counts) and mark the material learned, in one
    transaction, if this attempt still holds the material; returns False (writing nothing) when
    another attempt took over."""
    with transaction.atomic():
        material = (
            Material.objects.select_for_update(of=("self",))
            .select_related("owner", "version")
            .get(pk=material_id)
        )
        if material.state != Material.LEARNING or material.attempts != attempt:
            return False
        version = material.version
        # Section refs are fingerprinted as the blocks are written: they must exist first.
        version.sections = len(extracted.sections)
        version.save(update_fields=["sections"])
        counts = write(material, version) or {}
        _learned(material, version, extracted, job=job, counts=counts, note=note)
    return True


def material_learn(material_id: int, *, deferrals: int = 0) -> str:
    """The django-q2 job: learn one material once. Returns what happened (for the task log).
    `deferrals`: outages in a row so far (a deferred learning that came back)."""
    attempt = learning_claim(material_id)
    if attempt is None:
        return "not claimed: another worker holds it, or it is not queued"
    material = Material.objects.select_related("owner", "version").get(pk=material_id)
    version = material.version
    try:
        try:
            data = original_read(version.path)
        except FileNotFoundError:
            # Failed with the reason now, not left `learning` for the stuck sweep to find.
            raise LearnFailed(original_missing(version)) from None
        if hashlib.sha256(data).hexdigest() != version.sha256:
            raise LearnFailed("the stored original does not match its recorded sha256")
        try:
            # In a child process under the job's memory and CPU ceiling (extract_bounded).
            extracted = extract.extract_bounded(
                version.media_type,
                data,
                extract_limits(),
                memory_mb=settings.BRAIN_MATERIAL_EXTRACT_MEMORY_MB,
                seconds=settings.BRAIN_MATERIAL_EXTRACT_SECONDS,
            )
        except extract.Unreadable as exc:
            raise LearnFailed(str(exc)) from None
        if not extracted.sections:
            raise LearnFailed("the original holds no text to learn")
        learner, why = learner_for(material)
        if learner is not None:
            learner.learn(material=material, version=version, extracted=extracted, attempt=attempt)
            return "learned with a model"
        done = learning_commit(
            material_id=material_id,
            attempt=attempt,
            extracted=extracted,
            job=PLAIN_JOB,
            write=lambda m, v: learn_plain(m, v, extracted).counts,
            note=f"learned without a model ({why}): one entry whose blocks are its sections",
        )
        return "learned" if done else "taken over by another attempt; nothing written"
    except LearnFailed as exc:
        learning_fail(material_id, attempt, exc.reason)
        return f"failed: {exc.reason}"
    except LearnDeferred as exc:
        learning_defer(material_id, attempt, exc.reason, deferrals=deferrals)
        return f"deferred: {exc.reason}"
    except DatabaseError as exc:
        learning_fail(material_id, attempt, f"database error, nothing written: {exc}")
        return "failed: database error"
