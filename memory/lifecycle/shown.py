"""What a reviewer was shown before one decision on many memories (issue 58.3): a snapshot token
that names the exact memories, each with a fingerprint of what was shown of it (its text
version, owner, store, tier, key and value, the memory it retires). The decision acts on those
memories only — one that came to match the filter afterwards is never among them — and leaves,
and reports, each that changed since or left the queue. The token is signed, so a client cannot
widen it, and stateless, so the console's confirmation and the API's dry run give the same thing.
"""

import hashlib
import json

from django.core import signing

from knowledge.errors import Invalid

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


def shown_snapshot(shown: list[tuple[int, str]]) -> str:
    """The token naming `shown`, (memory id, fingerprint) pairs in the order they were shown."""
    return signing.dumps([[pk, fp] for pk, fp in shown], salt=SALT, compress=True)


def shown_read(token: str) -> dict[int, str]:
    """The memories a snapshot token names, id → fingerprint, in the order shown; Invalid (400)
    for a token this Brain did not sign, a tampered one, or one older than a day."""
    try:
        data = signing.loads(token or "", salt=SALT, max_age=MAX_AGE)
    except signing.SignatureExpired:
        raise Invalid({"snapshot": ["This confirmation is over a day old: confirm again."]}) from None
    except signing.BadSignature:
        raise Invalid({"snapshot": ["Not a confirmation this Brain gave: confirm again."]}) from None
    if not isinstance(data, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int) for pair in data
    ):
        raise Invalid({"snapshot": ["Not a confirmation this Brain gave: confirm again."]})
    return {pk: str(fp) for pk, fp in data}
