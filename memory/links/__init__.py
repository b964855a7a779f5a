"""Links between memories: a consolidation plan's link groups write them (`services`, reverted
with the plan), the reconciler decides them, and recall, browse and the memory page read them
(`selectors`)."""
