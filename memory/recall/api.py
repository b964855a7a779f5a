"""API: memory_search, memory_browse, the pinned memo and context compilation."""

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
)
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from knowledge import access
from knowledge.principal import ADMIN
from knowledge.principals.permissions import IsAgentOrReviewer
from knowledge.schema import error_response
from memory.recall.answers import browse_open, context_for, search_timed
from memory.recall.browse import KINDS
from memory.recall.memo import memo_for, memo_out, memo_update
from memory.recall.serializers import (
    BrowseOut,
    ContextIn,
    ContextOut,
    MemoIn,
    MemoOut,
    SearchIn,
    SearchOut,
)
from memory.recall.timing import timed_response


@extend_schema(
    request=SearchIn,
    responses={200: SearchOut},
    summary="memory_search: hybrid recall inside a conversation's scope",
    description="Four routes — keyword over entries and memories, vector over memories and entry "
    "blocks, keyword over messages, vector over episode summaries (and over messages no episode "
    "covers yet) — then a second hop of the message keyword route with the new terms of the best "
    "first hits (`routes.second_hop_messages`), all fused (a weighted sum of each ranking's "
    "normalised scores), decayed by age as of "
    "`now`, optionally reranked; `k` results, one ranked hit each, expanded (a thread, a lone "
    "message's neighbours, an episode's messages; context shown once), each result capped "
    "and all results together within `budget_tokens` (counted by Brain's token counter on the "
    "`text` fields). Each result gives its rank and score in every route that found it. Only "
    "active, unexpired memories are recalled. With embeddings off the keyword routes still answer.",
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def memory_search_view(request):
    data = SearchIn(data=request.data)
    data.is_valid(raise_exception=True)
    return timed_response(*search_timed(request.user, data.validated_data))


@extend_schema(
    responses={200: BrowseOut},
    parameters=[
        OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=list(KINDS)),
        OpenApiParameter(
            "conversation", int, description="Browse inside this conversation's scope (agents)."
        ),
    ],
    summary="memory_browse: the full thread, episode, entry, memory or conversation behind a result",
)
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def memory_browse_view(request, kind: str, pk: int):
    raw = request.query_params.get("conversation")
    if raw and not raw.isdigit():
        raise ValidationError({"conversation": ["A conversation id is a number."]})
    return Response(browse_open(request.user, kind=kind, pk=pk, conversation=int(raw) if raw else None))


# --- pinned memo ------------------------------------------------------------------------------


@extend_schema(
    methods=["GET"], responses={200: MemoOut}, summary="The agent's pinned memo, its tokens and budget"
)
@extend_schema(
    methods=["PUT"],
    request=MemoIn,
    responses={200: MemoOut, 409: error_response("`version` is not the current one.")},
    summary="Replace the pinned memo (admins)",
    description="400 when the text counts more tokens than BRAIN_MEMO_BUDGET_TOKENS; 409 when "
    "`version` is given and another version was saved meanwhile.",
)
@api_view(["GET", "PUT"])
@permission_classes([IsAgentOrReviewer])
def memo_view(request, agent: str):
    agent_obj = access.agent_get_for(
        request.user, agent, refusal="An agent may read only its own memo and context."
    )
    if request.method == "PUT":
        access.require_role(request.user, ADMIN, "Only admins edit pinned memos.")
        data = MemoIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        memo = memo_update(
            actor=request.user,
            agent=agent_obj,
            text=v["text"],
            expected_version=v.get("version"),
            reason=v["reason"],
        )
        return Response(memo_out(memo))
    return Response(memo_out(memo_for(agent_obj)))


# --- context ----------------------------------------------------------------------------------


@extend_schema(
    request=ContextIn,
    responses={200: ContextOut},
    summary="Compile the agent's context for one turn",
    description="Sections: instructions, pinned memo, skills (each enabled skill's base instructions and "
    "the agent's overlay of lessons), history (the conversation's last `history_turns` turns verbatim after "
    "a rolling summary of the earlier ones, kept per conversation), recalled memory (scored relevance × recency × "
    "confidence × density), each with its token count; the total never exceeds `budget_tokens`.",
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def context_view(request, agent: str):
    agent_obj = access.agent_get_for(
        request.user, agent, refusal="An agent may read only its own memo and context."
    )
    data = ContextIn(data=request.data)
    data.is_valid(raise_exception=True)
    return Response(context_for(request.user, agent_obj, data.validated_data))
