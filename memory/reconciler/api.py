"""API: run the reconciler over one agent now (reviewers and admins)."""

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes

from knowledge import names
from knowledge.llm.api import job_response
from knowledge.llm.serializers import ModelJobSerializer
from knowledge.principals.permissions import IsReviewer
from knowledge.web import no_body
from memory.consolidation.runs import reconcile_enqueue
from memory.reconciler.serializers import ConflictSerializer


@extend_schema(
    operation_id="agent_reconcile",
    summary="Reconcile one agent's memory now",
    description=(
        "Vector dedup, same-key conflicts, promotion, session digests and links over the agent's "
        "memories, written as one consolidation plan, in the background (its arbiter and digests "
        "call the model): answers 202 with the job; poll `GET /api/model-jobs/{id}` until its "
        "result names the reconciler run and its plan. BRAIN_MEMORY_CONSOLIDATION decides what "
        "happens to the plan: `propose` leaves it for review, `apply` applies it, `off` refuses "
        "(409); another plan running is also 409."
    ),
    request=None,
    responses={202: ModelJobSerializer, 400: None, 404: None, 409: ConflictSerializer},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
@no_body
def reconcile_view(request, agent: str):
    owner = names.agent_named(agent)
    job = reconcile_enqueue(actor=request.user, agent=owner)
    return job_response(job)
