"""The memory app's own rows, one module per concept (like knowledge.models): consolidation plans,
the eval gate, conversation history summaries and the reconciler's links and runs."""

from memory.models.consolidation import ConsolidationGroup, ConsolidationItem, ConsolidationPlan
from memory.models.gate import EvalDataset, GateCheck
from memory.models.history import ConversationSummary
from memory.models.reconciler import MemoryLink, ReconcilerRun

__all__ = [
    "ConsolidationGroup",
    "ConsolidationItem",
    "ConsolidationPlan",
    "ConversationSummary",
    "EvalDataset",
    "GateCheck",
    "MemoryLink",
    "ReconcilerRun",
]
