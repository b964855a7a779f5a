"""Consolidation: duplicates, same-key conflicts, near-duplicates and summaries of active
long-term memories, written as plans that can be applied and reverted exactly.
`find` decides what changes (and calls the model); `plans` runs and writes a plan; `apply`
applies, reverts and discards it; `common` holds what they share."""

from memory.consolidation.apply import plan_apply, plan_discard, plan_revert
from memory.consolidation.common import (
    ConsolidationBusy,
    ConsolidationOff,
    PlanConflict,
    memory_state,
    merged_memories_activate,
)
from memory.consolidation.find import find_changes, near_duplicate_groups
from memory.consolidation.plans import consolidation_deferred, consolidation_run
from memory.consolidation.selectors import plan_detail, plan_list

__all__ = [
    "ConsolidationBusy",
    "ConsolidationOff",
    "PlanConflict",
    "consolidation_deferred",
    "consolidation_run",
    "find_changes",
    "memory_state",
    "merged_memories_activate",
    "near_duplicate_groups",
    "plan_apply",
    "plan_detail",
    "plan_discard",
    "plan_list",
    "plan_revert",
]
