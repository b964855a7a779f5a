"""The model's part of the relation finder (prompt and schema version "relation-model/1"): a pair
the code rules of memory.matching.relations leave undecided (the same subject, no rule fired) may
be put to the light model, in the background only (memory.lifecycle.conflicts.
contradictions_marked, after a trusted write's commit), through the governed client
(knowledge.llm.model_ask: profile, budget, usage row, one repair).

The reply must match SCHEMA and pass `reply_breach`: a contradiction or duplicate names a
reason, and every span it quotes is a piece of one of the two texts (folded case and spacing).
A reply that fails either is asked again once, then dropped: nothing is recorded from it. An
outage (the model server does not answer: knowledge.llm.outage) is not a reply: it raises
RelationDeferred, so the caller keeps the pair for when the server answers."""

from knowledge.llm import LIGHT, ModelError, model_ask, model_availability, outage
from memory.matching.relations import CONTRADICTION, DUPLICATE, Relation

VERSION = "relation-model/1"
PURPOSE = "relations.pair"
REPLY_TOKENS = 200
SYSTEM = (
    "You compare two short statements an assistant remembers. Answer with JSON only: "
    '{"relation": "contradiction" | "duplicate" | "neither", "reason": "...", "spans": ["..."]}. '
    "contradiction: both are about the same subject and cannot both be true now. duplicate: the "
    "same claim, nothing added or changed. neither: anything else (another subject, an added "
    "detail, both can hold). reason: a few words. spans: the words of each statement that "
    "disagree or agree, copied exactly from the statements (empty for neither)."
)
SCHEMA = {
    "type": "object",
    "properties": {
        "relation": {"type": "string", "enum": [CONTRADICTION, DUPLICATE, "neither"]},
        "reason": {"type": "string", "maxLength": 200},
        "spans": {"type": "array", "items": {"type": "string", "maxLength": 120}, "maxItems": 4},
    },
    "required": ["relation", "reason", "spans"],
    "additionalProperties": False,
}


def pair_messages(a: str, b: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Statement A (older): {a}\nStatement B (newer): {b}"},
    ]


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def reply_breach(data: dict, a: str, b: str) -> str:
    """Why the model's reply may not be used ("" when it may)."""
    if data["relation"] == "neither":
        return ""
    if not data["reason"].strip():
        return "a contradiction or duplicate needs a reason"
    if not data["spans"]:
        return "quote the words of the statements that disagree or agree in spans"
    pool = (_folded(a), _folded(b))
    for span in data["spans"]:
        if not span.strip() or not any(_folded(span) in text for text in pool):
            return f"the span {span[:60]!r} is in neither statement"
    return ""


class RelationDeferred(Exception):
    """The model server does not answer (an outage): the pair waits for it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def model_relation(a: str, b: str, *, agent, actor) -> Relation | None:
    """The light model's relation of `b` to `a`, checked; None when no model may be asked now
    (unconfigured, over budget) or its reply failed the schema or the check. Raises
    RelationDeferred when the server does not answer (the background check finds it down, or
    the call fails on the transport)."""
    down = outage(profile=LIGHT, agent=agent)
    if down:
        raise RelationDeferred(down)
    if model_availability(LIGHT, agent=agent):
        return None
    try:
        reply = model_ask(
            purpose=PURPOSE,
            messages=pair_messages(a, b),
            schema=SCHEMA,
            profile=LIGHT,
            agent=agent,
            actor=actor,
            max_tokens=REPLY_TOKENS,
            check=lambda data: reply_breach(data, a, b),
        )
    except ModelError as exc:
        if outage(exc):
            raise RelationDeferred(exc.reason) from None
        return None
    data = reply.data
    if data["relation"] == "neither":
        return Relation("", "model", 0.0, f"model: {data['reason'].strip()}")
    spans = " / ".join(s.strip() for s in data["spans"])
    return Relation(data["relation"], "model", 0.0, f"model ({VERSION}): {data['reason'].strip()} ({spans})")
