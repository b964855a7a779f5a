from knowledge.models.audit import AuditEvent, Revision
from knowledge.models.channels import Channel, Conversation
from knowledge.models.entries import CurationGuide, Entry, EntryRelation, EntrySearch
from knowledge.models.erasure import ErasedItem, Erasure
from knowledge.models.events import Webhook, WebhookDelivery
from knowledge.models.llm import ModelEndpointState, ModelJob, ModelProfile, ModelUsage
from knowledge.models.materials import ConnectorGrant, Material, MaterialVersion, Signal, SignalRule
from knowledge.models.memo import PinnedMemo
from knowledge.models.memories import Memory, MemoryContradiction, MemorySource, MemoryVersion
from knowledge.models.messages import ChannelIntegration, Episode, Message, MessageVector
from knowledge.models.principals import Agent, ApiToken, ConsolePreferences, Integration, Person
from knowledge.models.skills import AgentSkill, Skill, TaskOutcome
from knowledge.models.sources import SourceState
from knowledge.models.system import AuthFailure, EmbeddingClaim, EmbeddingMinute, Heartbeat, Setting, TermStat

__all__ = [
    "Agent",
    "AgentSkill",
    "ApiToken",
    "AuditEvent",
    "AuthFailure",
    "Channel",
    "ChannelIntegration",
    "ConnectorGrant",
    "ConsolePreferences",
    "Conversation",
    "CurationGuide",
    "Entry",
    "ErasedItem",
    "Erasure",
    "EntryRelation",
    "EntrySearch",
    "EmbeddingClaim",
    "EmbeddingMinute",
    "Episode",
    "Heartbeat",
    "Integration",
    "Material",
    "MaterialVersion",
    "Memory",
    "MemoryContradiction",
    "MemorySource",
    "MemoryVersion",
    "Message",
    "MessageVector",
    "ModelProfile",
    "ModelUsage",
    "ModelEndpointState",
    "ModelJob",
    "Person",
    "PinnedMemo",
    "Revision",
    "Setting",
    "Signal",
    "SignalRule",
    "Skill",
    "TermStat",
    "SourceState",
    "TaskOutcome",
    "Webhook",
    "WebhookDelivery",
]
