"""Reading one principal's curation guide. Beside the models only, so the access layer
(`knowledge.access.guide_get_for`) and the entries package both read it without importing each
other."""

from knowledge.models import Agent, CurationGuide


def guide_for(owner: Agent) -> CurationGuide:
    """The principal's curation guide, or an unsaved one with the defaults (version 0)."""
    guide = CurationGuide.objects.filter(owner=owner).first()
    if guide is None:
        guide = CurationGuide(
            owner=owner,
            domain_types=list(CurationGuide.DEFAULT_DOMAIN_TYPES),
            page_thresholds=dict(CurationGuide.DEFAULT_PAGE_THRESHOLDS),
            update_rules=CurationGuide.DEFAULT_UPDATE_RULES,
            version=0,
        )
    return guide
