"""Governed model calls: profiles, budgets, the one client. See client.model_call.

It lives in `knowledge` (the base layer) because every layer above needs it: the eval gate in
`memory`, the distiller, consolidation merges and Dreaming in `memory`/`curation`."""

from knowledge.llm.ask import model_ask
from knowledge.llm.client import (
    ModelError,
    ModelOutputInvalid,
    ModelPromptTooLong,
    ModelReply,
    ModelReplyCut,
    ModelUnavailable,
    ModelUnreachable,
    context_tokens,
    echoes_example,
    estimate_tokens,
    fits,
    model_call,
    parse_structured,
    prompt_estimate,
    prompt_room,
    reply_budget,
)
from knowledge.llm.outage import defer_later, deferral_pending, deferrals_waiting, deferred_reason, outage
from knowledge.llm.profiles import (
    DEFAULT,
    LIGHT,
    Profile,
    agent_model_set,
    endpoint_down,
    model_availability,
    model_profile_save,
    profile_resolve,
    profile_status,
    usage_today,
)

__all__ = [
    "DEFAULT",
    "LIGHT",
    "ModelError",
    "ModelOutputInvalid",
    "ModelPromptTooLong",
    "ModelReply",
    "ModelReplyCut",
    "ModelUnavailable",
    "ModelUnreachable",
    "context_tokens",
    "defer_later",
    "deferral_pending",
    "deferrals_waiting",
    "deferred_reason",
    "outage",
    "echoes_example",
    "fits",
    "reply_budget",
    "model_ask",
    "prompt_estimate",
    "prompt_room",
    "Profile",
    "agent_model_set",
    "endpoint_down",
    "estimate_tokens",
    "model_availability",
    "model_call",
    "model_profile_save",
    "parse_structured",
    "profile_resolve",
    "profile_status",
    "usage_today",
]
