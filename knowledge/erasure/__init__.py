"""Erasure: forgetting that really forgets (issue 60). An admin erases a memory, a message, a
conversation or everything about a person; the content goes for good — text, key, value,
vectors, keyword statistics, version history, source snapshots, episode text, the text copies in
the audit trail's revisions and in webhook bodies — and a tombstone stays in the ledger
(`knowledge.models.Erasure`, `ErasedItem`: ids and content hashes, never text), which a restore
re-applies. `selectors.erasure_plan` says exactly what goes (the dry run), `services.erasure_apply`
takes it in one transaction. Retiring (reversible) is the lifecycle's verb, not this one."""
