"""API: GET /api/status — what the Status tab reports, as JSON."""

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from curation.status.selectors import alerts, job_status, recall_status, status_for
from curation.status.serializers import (
    StatusOut,
)
from knowledge import access
from knowledge.principal import REVIEWER
from knowledge.replica import replica_reads


@extend_schema(
    responses={200: StatusOut},
    summary="Health: alerts, embedding configuration, vector coverage and backlog per kind, jobs",
    description="`alerts` lists what needs a person, most urgent first. `jobs.recent_failures` "
    "(task results may quote stored text) is given to reviewers and admins only. Agents and "
    "integrations get every count but only their own listed items (an agent's memo, materials, "
    "Dreaming and reconciler rows; the channels they take part in; lints of entries they read).",
)
@api_view(["GET"])
@replica_reads
def status_view(request):
    status = status_for(request.user, recall_status())
    jobs = job_status()
    if not access.has_role(request.user, REVIEWER):
        jobs = {k: v for k, v in jobs.items() if k != "recent_failures"}
    # Alerts are drawn from what this principal sees, so they name nobody else's items either.
    return Response({**status, "jobs": jobs, "alerts": alerts(status, jobs)})
