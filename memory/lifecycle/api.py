"""The memory API: write, read, review and operate on memories; finish a run."""

import math

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from knowledge import access, names
from knowledge.limits import MAX_PAGE
from knowledge.models import Memory
from knowledge.principals.permissions import IsAgentOrReviewer, IsReviewer
from knowledge.replica import safe_only
from knowledge.schema import error_response
from knowledge.web import no_body, page_params, validated
from memory.lifecycle import expiry, operate, queue, review, selectors, write
from memory.lifecycle.serializers import (
    ApproveSerializer,
    KeepSerializer,
    MemoryDetailSerializer,
    MemoryListQuerySerializer,
    MemoryPageSerializer,
    MemorySerializer,
    MemoryWriteSerializer,
    PromoteSerializer,
    ReasonSerializer,
    ReviseSerializer,
    RunFinishedSerializer,
    RunFinishSerializer,
    facets_out,
    memory_out,
    shown_to,
    version_out,
    write_route,
)

# The list's paging parameters: knowledge.web.page_params reads them, the filters' serializer not.
PAGE_PARAMS = ("page", "page_size")
# The list's parameters that are the review queue's filters (memory.lifecycle.queue), besides import.
QUEUE_FILTERS = ("agent", "store", "tier", "category", "reason", "source", "author", "age", "q")
ERROR = error_response('JSON error: {"error": "...", ...}')
CONFLICT = OpenApiResponse(
    inline_serializer(
        "MemoryConflict",
        {
            "error": serializers.CharField(),
            "policy_violation": serializers.ChoiceField(choices=["memory_conflict"], required=False),
            "conflicts_with": serializers.ListField(child=serializers.IntegerField(), required=False),
            "memory": serializers.IntegerField(required=False, help_text="A state conflict: the memory."),
            "status": serializers.CharField(required=False, help_text="A state conflict: its status now."),
            "decisions": serializers.ListField(
                child=serializers.CharField(),
                required=False,
                help_text="A conflict: the decisions approval needs (replace, keep_both, reject).",
            ),
            "unseen": serializers.ListField(
                child=serializers.IntegerField(),
                required=False,
                help_text="An approval with `shown`: the memories it would also retire or close.",
            ),
        },
    ),
    description="The memory is not in a state for this action (another reviewer acted first), or strict "
    'anti-drift refused it: {"error", "policy_violation": "memory_conflict", "conflicts_with": [ids]}.',
)
TAG = ["memory"]


def _reloaded(memory: Memory, reader) -> dict:
    memory = Memory.objects.select_related("owner").prefetch_related("sources").get(pk=memory.pk)
    return memory_out(memory, reader=reader)


@extend_schema(
    methods=["POST"],
    operation_id="memory_write",
    tags=TAG,
    summary="Write a memory",
    description="Writes a memory for an agent into a store. An untrusted agent's write is queued for "
    "review; a trusted agent's (or a reviewer's) is active at once. Agents write only as themselves "
    "and only into stores they may write. Invalid bodies get 400 with per-field messages and write "
    "nothing. With BRAIN_STRICT_ANTI_DRIFT on, contradicting an active semantic memory of "
    "confidence ≥ 0.9 with the same key without naming it in `supersedes` gets 409. A write that would "
    "conflict with an active memory (same key, another value, overlapping validity) is queued with "
    "queue_reason `conflict` unless it names what it `supersedes`. An agent's exact duplicate of a live "
    "memory is answered 200 with that memory and `duplicate_of`.",
    request=MemoryWriteSerializer,
    responses={
        201: MemorySerializer,
        200: OpenApiResponse(
            MemorySerializer,
            description="An agent's exact duplicate of a live memory: nothing stored; the existing "
            "memory, with `duplicate_of`.",
        ),
        400: ERROR,
        403: ERROR,
        409: CONFLICT,
    },
    examples=[
        OpenApiExample(
            "A fact with a source",
            request_only=True,
            value={
                "agent": "copilot",
                "scope": "agent",
                "text": "VPN-4012 is fixed by client 5.2.1",
                "sources": [{"kind": "kb", "ref": "KB-7"}],
            },
        )
    ],
)
@extend_schema(
    methods=["GET"],
    operation_id="memory_list",
    tags=TAG,
    summary="List memories",
    description="Memories the token may read (agents: the stores they may browse), newest first. "
    "With status=queued this is the review queue for scripts, filtered as the console's queue is "
    "(agent, store, tier, category, reason, source, import, author, age, q; order=oldest for the "
    "queue's order); facets=true adds each filter's counts per value under the rest of the filter. "
    "An unknown filter or value is a 400 naming it.",
    parameters=[
        MemoryListQuerySerializer,
        OpenApiParameter("page", int, description=f"1 to {MAX_PAGE:,} (default 1)."),
        OpenApiParameter("page_size", int, description="1 to 200 (default 50)."),
    ],
    responses={200: MemoryPageSerializer, 400: ERROR},
)
@api_view(["GET", "POST"])
@permission_classes([IsAgentOrReviewer])
@safe_only  # the list may read from the replica; a write and everything after it: the primary
def memory_collection(request):
    principal = request.user
    if request.method == "POST":
        data = validated(MemoryWriteSerializer, request.data, principal=principal)
        route = write_route(data)
        memory = write.memory_write(
            actor=principal, request=write.WriteRequest(**names.write_named(principal, data)), route=route
        )
        created = not getattr(memory, "duplicate_of", None)
        return Response(
            memory_out(memory, reader=principal),
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    filters = request.query_params.copy()
    for name in PAGE_PARAMS:
        filters.pop(name, None)
    query = validated(MemoryListQuerySerializer, filters)
    page, size = page_params(request.query_params, size_default=50, size_most=200)
    where = queue.QueueFilter(
        **{name: query.pop(name, "") for name in QUEUE_FILTERS},
        imported=query.pop("import", ""),
    )
    order, facets = query.pop("order"), query.pop("facets")
    base = selectors.memory_list(principal, **query)
    qs = queue.queue_ordered(queue.memories_matching(base, where), order)
    count = qs.count()
    rows = list(qs[(page - 1) * size : page * size]) if count else []
    shown = shown_to(principal, rows)
    results = [memory_out(m, reader=principal, shown=shown) for m in rows]
    body = {
        "count": count,
        "page": page,
        "page_size": size,
        "pages": math.ceil(count / size),
        "results": results,
    }
    if facets:
        body["facets"] = facets_out(queue.queue_facets(where, base=base))
    return Response(body)


@extend_schema(
    methods=["GET"],
    tags=TAG,
    summary="One memory, with its versions",
    responses={200: MemoryDetailSerializer, 403: ERROR, 404: ERROR},
)
@extend_schema(
    methods=["DELETE"],
    operation_id="memory_retire",
    tags=TAG,
    summary="Retire a memory: an agent its own, a reviewer any (reversible)",
    description="Takes the memory out of recall at once (status invalidated, audited as memory.revoked, "
    "restorable from the audit trail; memories citing it go stale). Nothing is erased: an admin can "
    "still erase it (POST /api/erasures) or restore it. 409 when it is no longer live.",
    parameters=[OpenApiParameter("reason", str, description="Why (kept on the memory and the audit event).")],
    request=None,
    responses={200: MemorySerializer, 403: ERROR, 404: ERROR, 409: CONFLICT},
)
@api_view(["GET", "DELETE"])
@permission_classes([IsAgentOrReviewer])
def memory_detail(request, memory_id: int):
    if request.method == "DELETE":
        reason = request.query_params.get("reason", "")[:2000]
        memory = operate.memory_retire(actor=request.user, memory_id=memory_id, reason=reason)
        return Response(_reloaded(memory, request.user))
    memory = access.memory_get_for(request.user, memory_id)
    if memory.status == Memory.QUEUED:
        memory.related = selectors.related_with_model([memory], request.user)[memory.pk]
    body = memory_out(memory, reader=request.user)
    body["versions"] = [version_out(v) for v in memory.versions.order_by("-version")]
    return Response(body)


@extend_schema(
    tags=TAG,
    summary="Approve a queued memory (reviewers)",
    description="Puts the memory through the activation function (route: review). With `text`, the "
    "edit becomes a new version first. 409 when it is no longer queued (e.g. another reviewer acted), "
    "or when it conflicts with active memories (same key, another value, overlapping validity) and no "
    "`decision` is given (`conflicts_with` names them), or when it would retire or close a memory "
    "`shown` does not name (`unseen` names them).",
    request=ApproveSerializer,
    responses={200: MemorySerializer, 400: ERROR, 403: ERROR, 404: ERROR, 409: CONFLICT},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
def memory_approve(request, memory_id: int):
    data = validated(ApproveSerializer, request.data)
    supersedes = None
    if "supersedes" in data:
        supersedes = get_object_or_404(Memory, pk=data["supersedes"])
    memory = review.memory_approve(
        actor=request.user,
        memory_id=memory_id,
        text=data.get("text"),
        reason=data["reason"],
        supersedes=supersedes,
        decision=data.get("decision"),
        boundary=data.get("boundary"),
        shown=data.get("shown"),
    )
    return Response(_reloaded(memory, request.user))


@extend_schema(
    tags=TAG,
    summary="Settle a conflict in force in favour of this active memory (reviewers)",
    description="For conflicts already in force (older data, a restore): `replace` supersedes every "
    "active memory with its key that says otherwise over the same time; `keep_both` ends them at "
    "`boundary`, where this one starts. 409 when it conflicts with nothing now.",
    request=KeepSerializer,
    responses={200: MemorySerializer, 400: ERROR, 403: ERROR, 404: ERROR, 409: CONFLICT},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
def memory_keep(request, memory_id: int):
    data = validated(KeepSerializer, request.data)
    access.memory_get_for(request.user, memory_id)
    memory = review.memory_conflict_resolve(
        actor=request.user,
        memory_id=memory_id,
        decision=data["decision"],
        boundary=data.get("boundary"),
        reason=data["reason"],
    )
    return Response(_reloaded(memory, request.user))


@extend_schema(
    tags=TAG,
    summary="Reject a queued memory (reviewers; reason required)",
    request=ReasonSerializer,
    responses={200: MemorySerializer, 400: ERROR, 403: ERROR, 404: ERROR, 409: CONFLICT},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
def memory_reject(request, memory_id: int):
    data = validated(ReasonSerializer, request.data)
    memory = review.memory_reject(actor=request.user, memory_id=memory_id, reason=data["reason"])
    return Response(_reloaded(memory, request.user))


@extend_schema(
    tags=TAG,
    summary="Pin a memory (reviewers)",
    request=None,
    responses={200: MemorySerializer, 403: ERROR, 404: ERROR, 409: CONFLICT},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
@no_body
def memory_pin(request, memory_id: int):
    return Response(_reloaded(operate.memory_pin(actor=request.user, memory_id=memory_id), request.user))


@extend_schema(
    tags=TAG,
    summary="Unpin a memory (reviewers)",
    request=None,
    responses={200: MemorySerializer, 403: ERROR, 404: ERROR},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
@no_body
def memory_unpin(request, memory_id: int):
    return Response(_reloaded(operate.memory_unpin(actor=request.user, memory_id=memory_id), request.user))


@extend_schema(
    tags=TAG,
    summary="Revoke a wrong memory (reviewers; reason required)",
    description="Retires the memory for good (status invalidated; the row is kept for lineage). "
    "Memories that cite it become stale.",
    request=ReasonSerializer,
    responses={200: MemorySerializer, 400: ERROR, 403: ERROR, 404: ERROR, 409: CONFLICT},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
def memory_revoke(request, memory_id: int):
    data = validated(ReasonSerializer, request.data)
    memory = operate.memory_revoke(actor=request.user, memory_id=memory_id, reason=data["reason"])
    return Response(_reloaded(memory, request.user))


@extend_schema(
    tags=TAG,
    summary="Correct a memory's text (reviewers; reason required)",
    description="The text becomes a new version; the old one stays in the history. Status is unchanged.",
    request=ReviseSerializer,
    responses={200: MemorySerializer, 400: ERROR, 403: ERROR, 404: ERROR, 409: CONFLICT},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
def memory_revise(request, memory_id: int):
    data = validated(ReviseSerializer, request.data)
    memory = operate.memory_revise(actor=request.user, memory_id=memory_id, **data)
    return Response(_reloaded(memory, request.user))


@extend_schema(
    tags=TAG,
    summary="Promote a memory to a higher tier or confidence (reviewers)",
    description="With an empty body a short-term memory becomes semantic, a long-term one gets "
    "confidence 1.0. Promoted out of the short-term tiers, a memory no longer expires.",
    request=PromoteSerializer,
    responses={200: MemorySerializer, 400: ERROR, 403: ERROR, 404: ERROR, 409: CONFLICT},
)
@api_view(["POST"])
@permission_classes([IsReviewer])
def memory_promote(request, memory_id: int):
    data = validated(PromoteSerializer, request.data)
    memory = operate.memory_promote(actor=request.user, memory_id=memory_id, **data)
    return Response(_reloaded(memory, request.user))


@extend_schema(
    tags=["runs"],
    summary="Finish a run: clear its working memory",
    description="Every live working-tier memory written with this run_id expires (audited as "
    "memory.cleared). An agent token finishes its own run; reviewers may name an agent or clear "
    "the run id for every agent. Finishing twice clears nothing more.",
    request=RunFinishSerializer,
    responses={200: RunFinishedSerializer, 400: ERROR, 403: ERROR, 404: ERROR},
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def run_finish(request, run_id: str):
    principal = request.user
    data = validated(RunFinishSerializer, request.data)
    owner = None
    if principal.is_agent:
        owner = principal.agent
        if data.get("agent", owner.name) != owner.name:
            raise PermissionDenied("An agent may finish only its own runs.")
    elif "agent" in data:
        owner = names.agent_named(data["agent"])
    ids = expiry.memory_clear_working(actor=principal, run_id=run_id, owner=owner)
    return Response({"run_id": run_id, "cleared": len(ids), "memory_ids": ids})
