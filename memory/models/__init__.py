"""The memory app's own rows, one module per concept (like knowledge.models): consolidation plans,
the eval gate, conversation history summaries, the reconciler's links and runs, and reviewers'
verdicts on the queue's hints."""

from memory.models.consolidation import ConsolidationGroup, ConsolidationItem, ConsolidationPlan
from memory.models.gate import EvalDataset, GateCheck
from memory.models.hints import HintVerdict
from memory.models.history import ConversationSummary
from memory.models.reconciler import MemoryLink, ReconcilerRun

__all__ = [
    "ConsolidationGroup",
    "ConsolidationItem",
    "ConsolidationPlan",
    "ConversationSummary",
    "EvalDataset",
    "GateCheck",
    "HintVerdict",
    "MemoryLink",
    "ReconcilerRun",
]
