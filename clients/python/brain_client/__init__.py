"""A typed client for Brain's REST API. `Brain(url, token)` is the entry point."""

from brain_client.client import OPERATIONS, Brain
from brain_client.errors import (
    BadRequest,
    BrainError,
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    Unauthorized,
)
from brain_client.models import (
    CompiledContext,
    Conversation,
    Me,
    Memo,
    Memory,
    MessagesStored,
    MessageStored,
    Page,
    SearchResults,
)

__all__ = [
    "OPERATIONS",
    "BadRequest",
    "Brain",
    "BrainError",
    "CompiledContext",
    "Conflict",
    "Conversation",
    "Forbidden",
    "Me",
    "Memo",
    "Memory",
    "MessageStored",
    "MessagesStored",
    "NotFound",
    "Page",
    "PayloadTooLarge",
    "RateLimited",
    "SearchResults",
    "ServerError",
    "Unauthorized",
]
