"""The API's decision on many queued memories, bound to what the client was shown (issue 58.3):
GET is the dry run — the memories a filter matches now, their ids and a snapshot token naming
them; POST decides exactly the memories it names (`ids`, or the dry run's `snapshot`, which also
leaves queued any that changed since). There is no decision "by filter" on the server's side:
a memory that comes to match a filter after the client looked is never decided unseen."""

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge import access
from knowledge.principals.permissions import IsReviewer
from knowledge.schema import error_response
from knowledge.web import validated
from memory.lifecycle import hints, queue, review
from memory.lifecycle.decisions.serializers import (
    MOST,
    ReviewDecidedSerializer,
    ReviewDecisionSerializer,
    ReviewFilterQuerySerializer,
    ReviewPreviewSerializer,
    UnrelatedOutSerializer,
    UnrelatedSerializer,
    decided_out,
)
from memory.lifecycle.shown import shown_flags, shown_snapshot

ERROR = error_response('JSON error: {"error": "...", ...}')
FILTERS = ("agent", "store", "tier", "category", "reason", "source", "author", "age", "q")


@extend_schema(
    methods=["GET"],
    operation_id="memory_review_preview",
    tags=["memory"],
    summary="Dry run of a decision on many queued memories (reviewers)",
    description="The queued memories the filters match now (the console queue's filters), oldest "
    f"first, at most {MOST}: their ids and a `snapshot` token naming exactly them, and the duplicates "
    "and contradictions approving them would put in force (`flags`; the decision then says include "
    "or leave). Decides nothing.",
    parameters=[ReviewFilterQuerySerializer],
    responses={200: ReviewPreviewSerializer, 400: ERROR, 403: ERROR},
)
@extend_schema(
    methods=["POST"],
    operation_id="memory_review_decide",
    tags=["memory"],
    summary="Approve or reject many queued memories (reviewers)",
    description="Decides exactly the memories named — `ids`, or a dry run's `snapshot` — each with "
    "the checks and audit event of a lone decision, all in one audit batch. One that needs a "
    "decision a bulk action cannot make (a conflict), that left the queue, or (with `snapshot`) that "
    "changed since the dry run is left as it is and named with why.",
    request=ReviewDecisionSerializer,
    responses={200: ReviewDecidedSerializer, 400: ERROR, 403: ERROR},
)
@api_view(["GET", "POST"])
@permission_classes([IsReviewer])
def memory_review(request):
    if request.method == "GET":
        query = validated(ReviewFilterQuerySerializer, request.query_params)
        where = queue.QueueFilter(
            **{name: query.get(name, "") for name in FILTERS}, imported=query.get("import", "")
        )
        shown = queue.queue_matching_shown(where, order=query["order"], most=MOST)
        ids = [pk for pk, _ in shown]
        flags = shown_flags(ids, request.user)
        flagged = sorted({pk for flag in flags for pk in flag.leaves})
        return Response(
            {
                "count": len(ids),
                "capped": len(ids) == MOST,
                "ids": ids,
                "snapshot": shown_snapshot(shown, flagged),
                "flags": [flag.as_dict() for flag in flags],
                "flagged": flagged,
            }
        )
    data = validated(ReviewDecisionSerializer, request.data)
    if "snapshot" in data:
        result = review.memory_review_shown(
            actor=request.user,
            snapshot=data["snapshot"],
            action=data["action"],
            reason=data["reason"],
            flagged=data.get("flagged", ""),
        )
    else:
        result = review.memory_review_bulk(
            actor=request.user, memory_ids=data["ids"], action=data["action"], reason=data["reason"]
        )
    return Response(decided_out(result))


@extend_schema(
    operation_id="memory_hint_unrelated",
    tags=["memory"],
    summary="Dismiss a hint between two memories as unrelated (reviewers)",
    description="The duplicate or contradiction hint the review queue shows between this memory and "
    "`other` is wrong: remembered, so the pair is not flagged again (its card, `related`, an "
    "approval's contradiction check), counted per hint for the hints' precision (GET /api/status, "
    "conflicts.hints), audited as memory.hint_dismissed.",
    request=UnrelatedSerializer,
    responses={200: UnrelatedOutSerializer, 400: ERROR, 403: ERROR, 404: ERROR},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
def memory_unrelated(request, memory_id: int):
    data = validated(UnrelatedSerializer, request.data)
    for pk in (memory_id, data["other"]):
        access.memory_get_for(request.user, pk)
    verdict = hints.hint_dismiss(
        actor=request.user, memory_id=memory_id, other_id=data["other"], hint=data["hint"]
    )
    return Response(
        {
            "memory": memory_id,
            "other": data["other"],
            "hint": verdict.hint,
            "verdict": verdict.verdict,
            "by": verdict.actor_name,
        }
    )
