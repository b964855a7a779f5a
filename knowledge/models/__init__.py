from knowledge.models.audit import AuditEvent, Revision
from knowledge.models.channels import Channel, Conversation
from knowledge.models.entries import Entry
from knowledge.models.memo import PinnedMemo
from knowledge.models.memories import Memory, MemorySource, MemoryVersion
from knowledge.models.messages import ChannelIntegration, Episode, Message, MessageVector
from knowledge.models.principals import Agent, ApiToken, Integration, Person
from knowledge.models.system import Heartbeat, Setting

__all__ = [
    "Agent",
    "ApiToken",
    "AuditEvent",
    "Channel",
    "ChannelIntegration",
    "Conversation",
    "Entry",
    "Episode",
    "Heartbeat",
    "Integration",
    "Memory",
    "MemorySource",
    "MemoryVersion",
    "Message",
    "MessageVector",
    "Person",
    "PinnedMemo",
    "Revision",
    "Setting",
]
