"""The session digest's model prompt, its JSON schema and the code rules its reply must pass,
versioned together. Without a usable model the digest is extractive (memory.reconciler.find)."""

from memory.matching.rules import summary_breach

VERSION = 2
PURPOSE = "reconciler.digest"

SYSTEM = (
    "You write a session digest for an AI agent's long-term memory. The numbered memories below "
    "were noted during one conversation and are about to expire. Write ONE short digest that "
    "keeps every fact that may still matter later (names, numbers, dates, decisions), adds "
    'nothing that is not in them, and drops chatter. Reply with JSON: {"text": "<the digest>"}.'
)

SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 4000, "pattern": r"\S"}},
    "required": ["text"],
    "additionalProperties": False,
}


def check(text: str, originals: list[str]) -> str:
    """Code rules beyond the schema: '' if the digest may be used, else why not. A digest names
    no number, date or name its memories do not, and keeps each of their claims (memory.matching.rules)."""
    if not text.strip():
        return "empty digest"
    if len(text) > max(400, 2 * sum(len(t) for t in originals)):
        return "the digest is longer than what it digests"
    return summary_breach(text, originals, examples=("<the digest>", "the digest"), every_claim=True)
