"""The reconciler: keeps one agent's memory healthy between consolidation runs — vector dedup,
same-key conflicts, promotion after three turns, session digests instead of plain expiry, and
links to nearest neighbours. Every change is a consolidation plan (memory.consolidation).
`find` decides what changes, `services` runs a pass and records it, `selectors` says when an
agent is due, `tasks` is the every-minute tick."""
