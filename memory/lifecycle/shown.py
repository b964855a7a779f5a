"""What a reviewer was shown before one decision on many memories (issue 58.3): a snapshot token
that names the exact memories, each with a fingerprint of what was shown of it (its text
version, owner, store, tier, key and value, the memory it retires). The decision acts on those
memories only — one that came to match the filter afterwards is never among them — and leaves,
and reports, each that changed since or left the queue. The token is signed, so a client cannot
widen it, and stateless, so the console's confirmation and the API's dry run give the same thing.
"""

import hashlib
import json
from dataclasses import dataclass

from django.core import signing

from knowledge.errors import Invalid
from knowledge.models import Memory
from knowledge.principal import Principal

SALT = "brain.review.shown"
MAX_AGE = 24 * 3600  # seconds: an older confirmation is asked again
# The columns a fingerprint reads, in order (queue.queue_matching_shown selects them).
FINGERPRINT_FIELDS = ("version", "content_hash", "owner_id", "store", "tier", "key", "value", "supersedes_id")


def fingerprint(values) -> str:
    """A short digest of FINGERPRINT_FIELDS' values, in that order (a row's values_list)."""
    said = json.dumps(list(values), sort_keys=True, default=str)
    return hashlib.blake2s(said.encode(), digest_size=5).hexdigest()


def memory_fingerprint(memory) -> str:
    return fingerprint(getattr(memory, name) for name in FINGERPRINT_FIELDS)


def shown_snapshot(shown: list[tuple[int, str]], flagged: list[int] = ()) -> str:
    """The token naming `shown`, (memory id, fingerprint) pairs in the order they were shown, and
    `flagged`, those of them the confirmation named as putting a duplicate or a contradiction in
    force (`shown_flags`): an approval asks what to do with them."""
    return signing.dumps({"m": [[pk, fp] for pk, fp in shown], "f": list(flagged)}, salt=SALT, compress=True)


def shown_read(token: str) -> tuple[dict[int, str], list[int]]:
    """The memories a snapshot token names, id → fingerprint, in the order shown, and the
    flagged ones; Invalid (400) for a token this Brain did not sign, a tampered one, or one older
    than a day."""
    refused = Invalid({"snapshot": ["Not a confirmation this Brain gave: confirm again."]})
    try:
        data = signing.loads(token or "", salt=SALT, max_age=MAX_AGE)
    except signing.SignatureExpired:
        raise Invalid({"snapshot": ["This confirmation is over a day old: confirm again."]}) from None
    except signing.BadSignature:
        raise refused from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("m"), list)
        or not isinstance(data.get("f"), list)
    ):
        raise refused
    if not all(isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int) for pair in data["m"]):
        raise refused
    return {pk: str(fp) for pk, fp in data["m"]}, [pk for pk in data["f"] if isinstance(pk, int)]


@dataclass(frozen=True)
class Flag:
    """One pair an approval of many would put in force: `memory` (of the batch) duplicates or
    contradicts `other` (active, or of the batch too)."""

    memory: Memory
    other: Memory
    hint: str  # exact-duplicate | near-duplicate | contradiction
    why: str = ""

    @property
    def leaves(self) -> list[int]:
        """The queued memories "leave them queued" keeps back: the batch's side, both when both are."""
        return [self.memory.pk] + ([self.other.pk] if self.other.status == Memory.QUEUED else [])

    def as_dict(self) -> dict:
        return {"memory": self.memory.pk, "other": self.other.pk, "hint": self.hint, "why": self.why}


def shown_flags(memory_ids: list[int], principal: Principal) -> list[Flag]:
    """What approving all of `memory_ids` would put in force that the queue hints at: a duplicate
    of an active memory or of another of them (the exact and the near hints), and two of them that
    contradict each other (both would go active; one contradicting an active memory is left
    queued by the approval anyway: it needs a decision). Pairs a reviewer dismissed as unrelated
    are not named. The card page's hint statements, once for all of them (two round trips)."""
    from memory.lifecycle.duplicates import queue_duplicate_hints

    memories = list(
        Memory.objects.filter(pk__in=memory_ids, status=Memory.QUEUED)
        .select_related("owner")
        .defer("embedding")
    )
    batch = {m.pk for m in memories}
    found = queue_duplicate_hints(memories, principal)
    flags, seen = [], set()

    def add(memory, other, hint, why=""):
        key = tuple(sorted((memory.pk, other.pk)))
        if key in seen or not (other.status == Memory.ACTIVE or other.pk in batch):
            return
        seen.add(key)
        flags.append(Flag(memory, other, hint, why))

    for memory in memories:
        hints = found.get(memory.pk)
        if hints is None:
            continue
        for other in hints.exact:
            add(memory, other, "exact-duplicate", "the same text")
        for other, sim in hints.near:
            add(memory, other, "near-duplicate", f"cosine {sim:.2f}")
        for related in hints.queued:
            add(memory, related.memory, "contradiction", related.why)
    return flags
