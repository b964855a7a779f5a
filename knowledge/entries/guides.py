"""Curation guides: one per principal, edited only by people with the admin role (never by an
agent, never by Dreaming); Dreaming reads them. A guide is read with `CurationGuide.for_owner`
(through `knowledge.access.guide_get_for` where a principal asks)."""

from django.db import transaction

from knowledge import access
from knowledge.audit.services import audit_record, snapshot
from knowledge.entries.cleaning import clean_aliases, clean_text
from knowledge.errors import Conflict, Invalid
from knowledge.models import Agent, CurationGuide
from knowledge.principal import ADMIN, Principal


def guide_snapshot(guide: CurationGuide) -> dict:
    return snapshot(guide)


def guide_update(
    *,
    actor: Principal,
    owner: Agent,
    domain_types=None,
    taxonomy: str | None = None,
    page_thresholds=None,
    update_rules: str | None = None,
    expected_version: int | None = None,
) -> CurationGuide:
    """Create or edit a principal's curation guide. Only people with the admin role may: never an
    agent, never Dreaming. Each edit is a new version with an audited before/after."""
    access.require_role(actor, ADMIN, "Only admins edit curation guides.", person=True)
    changes = {}
    if domain_types is not None:
        types = clean_aliases(domain_types, "domain_types")
        changes["domain_types"] = [t.lower() for t in types]
    if taxonomy is not None:
        changes["taxonomy"] = clean_text(taxonomy, "taxonomy", required=False)
    if page_thresholds is not None:
        if not isinstance(page_thresholds, dict) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in page_thresholds.values()
        ):
            raise Invalid({"page_thresholds": ["A JSON object of numbers."]})
        changes["page_thresholds"] = page_thresholds
    if update_rules is not None:
        changes["update_rules"] = clean_text(update_rules, "update_rules", required=False)
    with transaction.atomic():
        guide = CurationGuide.objects.select_for_update().filter(owner=owner).first()
        if guide is None:
            guide = CurationGuide(
                owner=owner,
                domain_types=list(CurationGuide.DEFAULT_DOMAIN_TYPES),
                page_thresholds=dict(CurationGuide.DEFAULT_PAGE_THRESHOLDS),
                update_rules=CurationGuide.DEFAULT_UPDATE_RULES,
                version=0,
            )
            before = None
        else:
            before = guide_snapshot(guide)
        current = guide.version if before is not None else 0
        if expected_version is not None and expected_version != current:
            raise Conflict(
                f"The curation guide of {owner.name} was edited by {guide.updated_by} since you opened it "
                f"(version {current}, you had {expected_version}). Reload and try again."
            )
        changed = [f for f, v in changes.items() if getattr(guide, f) != v]
        if before is not None and not changed:
            return guide
        for field, value in changes.items():
            setattr(guide, field, value)
        guide.version = current + 1
        guide.updated_by = actor.name
        guide.save()
        guide.audit_event = audit_record(
            "guide.updated" if before else "guide.created",
            actor=actor,
            store=CurationGuide.STORE,
            owner=owner.name,
            object_type="guide",
            object_ids=[guide.pk],
            data={"version": guide.version, "fields": changed},
            revisions=[("guide", guide.pk, before, guide_snapshot(guide))],
        )
    return guide
