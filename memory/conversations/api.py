"""API: channels, message ingestion and conversations (the evidence recall searches)."""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge import access, names
from knowledge.conversations import services as evidence
from knowledge.principals.permissions import (
    IsAgentIntegrationOrAdmin,
    IsAgentOrAdmin,
    IsAgentOrReviewer,
    IsIntegrationOrAdmin,
)
from knowledge.schema import error_response
from knowledge.web import no_body, validated
from memory.conversations.serializers import (
    ChannelIn,
    ChannelOut,
    ConversationIn,
    ConversationOut,
    MessageBatchIn,
    MessageIn,
    MessagesIn,
    MessagesOut,
    channel_out,
    conversation_out,
)
from memory.conversations.services import conversation_finish, conversation_open, messages_post

# --- channels ---------------------------------------------------------------------------------


@extend_schema(
    request=ChannelIn,
    responses={201: ChannelOut},
    summary="Create a channel (admins and integrations)",
    description="An integration that creates a channel takes part in it (may post messages); admins "
    "may name integrations that take part. A direct message (`kind: dm`) names the `person` it is "
    "with and the `agent` it belongs to: only that agent opens conversations there, and only that "
    "agent, an integration taking part, or an admin posts to it. `memory_scope` is the routing rule: `shared` or "
    "`channel` (channel-only). A changed rule applies only to later conversations.",
)
@api_view(["POST"])
@permission_classes([IsIntegrationOrAdmin])
def channel_create(request):
    data = validated(ChannelIn, request.data)
    agent = names.scope_for(request.user, agent=data.pop("agent", None)).agent
    integrations = names.integrations_named(data.pop("integrations"))
    channel = evidence.channel_open(actor=request.user, agent=agent, integrations=integrations, **data)
    return Response(channel_out(channel), status=status.HTTP_201_CREATED)


# --- messages ---------------------------------------------------------------------------------


@extend_schema(
    request=MessagesIn,
    responses={201: MessagesOut, 200: MessagesOut},
    summary='Post messages (one, or up to 1,000 as {"messages": [...]})',
    description="Agents and integrations post to channels they take part in (an agent takes part "
    "by opening a conversation there); admins to any channel. `speaker` is a person's or agent's "
    "display name, spaces and any script allowed, at most 64 characters (`person:`/`agent:` force the "
    "kind; an agent's name matches in any letter case; unknown people are created). The same `external_id` in "
    "the same channel is stored once: a repeat is answered with the stored message's id and "
    "`duplicate: true`. Messages are embedded later by the worker, never in this request. "
    "A single message is answered with that message's object (`MessageStored`), a batch with "
    "`MessagesStored`; 201 when anything was stored, 200 when every message was a repeat.",
    examples=[
        OpenApiExample(
            "one",
            value={"channel": "support", "speaker": "alice", "text": "VPN error E4012", "external_id": "m-1"},
        ),
        OpenApiExample(
            "many",
            value={
                "messages": [{"channel": "support", "speaker": "alice", "text": "hi", "external_id": "m-2"}]
            },
        ),
    ],
)
@api_view(["POST"])
@permission_classes([IsAgentIntegrationOrAdmin])
def message_post(request):
    body = request.data
    single = not (isinstance(body, dict) and "messages" in body)
    if single:
        data = MessageIn(data=body)
        data.is_valid(raise_exception=True)
        items = [data.validated_data]
    else:
        data = MessageBatchIn(data=body)
        data.is_valid(raise_exception=True)
        items = data.validated_data["messages"]
    rows, result = messages_post(request.user, items)
    code = status.HTTP_201_CREATED if result.stored else status.HTTP_200_OK
    if single:
        return Response(rows[0], status=code)
    return Response(
        {"received": len(items), "stored": result.stored, "duplicates": result.duplicates, "messages": rows},
        status=code,
    )


# --- conversations ----------------------------------------------------------------------------


@extend_schema(
    request=ConversationIn,
    responses={201: ConversationOut},
    summary="Open a conversation (an agent takes part in the channel from now on)",
    description="Agents open conversations for themselves, admins for any agent; in a direct "
    "message only for the agent it belongs to (403 otherwise). The conversation's scope — the stores it reads and the store it writes — is fixed "
    "now, from the channel's current routing rule, and never changes.",
)
@api_view(["POST"])
@permission_classes([IsAgentOrAdmin])
def conversation_create(request):
    data = ConversationIn(data=request.data)
    data.is_valid(raise_exception=True)
    conversation = conversation_open(request.user, data.validated_data)
    return Response(conversation_out(conversation), status=status.HTTP_201_CREATED)


@extend_schema(responses={200: ConversationOut}, summary="A conversation and its fixed scope")
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def conversation_detail(request, pk: int):
    return Response(conversation_out(access.conversation_get_for(request.user, pk)))


@extend_schema(
    request=None,
    responses={200: ConversationOut, 409: error_response("The conversation is already finished.")},
    summary="Finish a conversation",
    description="409 when it is already finished (of two concurrent finishes exactly one wins).",
)
@api_view(["POST"])
@permission_classes([IsAgentOrAdmin])
@no_body
def conversation_finish_view(request, pk: int):
    conversation = access.conversation_get_for(request.user, pk)
    conversation = conversation_finish(actor=request.user, conversation_id=conversation.pk)
    return Response(conversation_out(conversation))
