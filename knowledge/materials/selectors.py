"""Reads of materials: what a principal may see (store rules from knowledge.access; one
material is `knowledge.access.material_get_for`), the entries citing a material, and the Status
section's figures."""

from django.db.models import Count, Q, Sum
from django.utils import timezone

from knowledge import access
from knowledge.models import Agent, Entry, Material, MaterialVersion, Memory, MemorySource
from knowledge.principal import Principal


def materials_for(principal: Principal, *, listed_only: bool = False, state: str = ""):
    """The materials `principal` may see, newest first. `listed_only`: the retained files and
    connector documents the Materials tab lists (pasted text and web content are entries)."""
    qs = Material.objects.filter(access.readable_q(principal)).select_related("owner", "version")
    if listed_only:
        qs = qs.filter(kind__in=[Material.FILE, Material.CONNECTOR])
    if state:
        qs = qs.filter(state=state)
    return qs


def citing_entries(principal: Principal, material: Material):
    """Live entries `principal` may see with a live block citing `material` (any ref form)."""
    ref = material.source_ref
    cited = MemorySource.objects.filter(kind="material").filter(Q(ref=ref) | Q(ref__startswith=f"{ref}#"))
    blocks = Memory.objects.filter(
        pk__in=cited.values("memory_id"), entry__isnull=False, status__in=(Memory.ACTIVE, Memory.QUEUED)
    )
    return (
        Entry.objects.filter(pk__in=blocks.values("entry_id"))
        .filter(access.readable_q(principal))
        .select_related("owner")
        .annotate(citing_blocks=Count("blocks", filter=Q(blocks__in=blocks)))
        .order_by("name")
    )


def material_versions(material: Material):
    return MaterialVersion.objects.filter(material=material).order_by("-number")


def materials_status(now=None) -> dict:
    """Stuck learning (past the job timeout), failed learning, withdrawn connector documents and
    the storage the originals use."""
    from knowledge.materials.services import job_timeout_seconds

    now = now or timezone.now()
    stuck_before = now - timezone.timedelta(seconds=job_timeout_seconds())
    stuck = Material.objects.filter(state=Material.LEARNING, learning_started_at__lt=stuck_before)
    failed = Material.objects.filter(state=Material.FAILED)
    withdrawn = Material.objects.filter(withdrawn_at__isnull=False)
    usage = MaterialVersion.objects.aggregate(bytes=Sum("size"), versions=Count("id"))
    by_state = dict(Material.objects.values_list("state").annotate(n=Count("id")).order_by())
    return {
        "job_timeout_seconds": job_timeout_seconds(),
        "by_state": {state: by_state.get(state, 0) for state, _ in Material.STATES},
        "stuck": [_row(m) for m in stuck.select_related("owner")[:20]],
        "stuck_count": stuck.count(),
        "failed": [_row(m) for m in failed.select_related("owner")[:20]],
        "failed_count": failed.count(),
        "withdrawn": [_row(m) for m in withdrawn.select_related("owner")[:20]],
        "withdrawn_count": withdrawn.count(),
        "storage_bytes": usage["bytes"] or 0,
        "versions": usage["versions"] or 0,
    }


def _row(m: Material) -> dict:
    return {
        "id": m.pk,
        "title": m.title,
        "ref": m.source_ref,
        "agent": m.owner.name,
        "state": m.state,
        "reason": m.reason,
        "attempts": m.attempts,
        "since": (m.withdrawn_at or m.learning_started_at or m.updated_at).isoformat(),
    }


def materials_alerts(report: dict) -> list[dict]:
    alerts = []
    if report["stuck_count"]:
        alerts.append(
            {
                "level": "warning",
                "text": f"{report['stuck_count']} material(s) stuck in learning longer than the job timeout; "
                "Retry them on the Materials tab.",
            }
        )
    if report["failed_count"]:
        alerts.append(
            {"level": "warning", "text": f"Learning failed for {report['failed_count']} material(s)."}
        )
    return alerts


def owner_for(principal, name) -> Agent:
    """The agent a material is learned by: an agent asks only for itself; people name one."""
    return access.owner_for_write(
        principal,
        name,
        field="agent",
        refusal="An agent may ask only itself to learn a source.",
        missing="Name the agent that learns it.",
    )
