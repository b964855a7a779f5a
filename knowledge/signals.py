"""Signals other layers listen to without the sender importing them (the dependency direction
is curation → memory → knowledge)."""

from django.dispatch import Signal

# Sent (inside the finishing transaction) when a conversation is finished: kwargs
# `conversation`. The distiller (curation) enqueues its work on commit.
conversation_finished = Signal()

# Sent inside the transaction that gave a material a new version or withdrew it: kwargs
# `actor` and `refs` (the refs it is cited by, without a section). Provenance (memory) rechecks
# the memories citing it, so they go stale by the invalidation mode at once.
material_changed = Signal()

# Sent inside an erasure's transaction (knowledge.erasure): kwargs `memory_ids`, `message_ids`,
# `conversation_ids`, `channel_ids` (where erased messages were). The memory app drops what it derived from them (conversation summaries,
# links, consolidation items' copies), so no erased text outlives the transaction.
content_erased = Signal()
