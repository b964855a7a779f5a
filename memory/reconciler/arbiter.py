"""The reconciler's conflict arbiter (opt-in: BRAIN_RECONCILER_ARBITER=on): its prompt, its JSON
schema and the code rules its reply must pass, versioned together. The light model, through the
governor (budgeted like every model call), picks which of several same-key memories is right
now; anything it returns that fails the rules is ignored and the formula's winner stands."""

VERSION = 1
PURPOSE = "reconciler.arbiter"

SYSTEM = (
    "You settle a conflict in an AI agent's memory. The numbered memories below give different "
    "values for the same key. Pick the one most likely correct now, judging by what each says, "
    "its sources, its confidence and its date. Reply with JSON: "
    '{"winner": <memory id>, "reason": "<one sentence>"}.'
)


def schema(member_ids: list[int]) -> dict:
    return {
        "type": "object",
        "properties": {
            "winner": {"type": "integer", "enum": list(member_ids)},
            "reason": {"type": "string", "maxLength": 500},
        },
        "required": ["winner", "reason"],
        "additionalProperties": False,
    }


def user_message(key: str, members: list[int], info: dict, kinds: dict) -> str:
    lines = [
        f"#{i} ({info[i]['created_at']:%Y-%m-%d}, confidence {info[i]['confidence']:.2f}, "
        f"sources: {', '.join(sorted(set(kinds[i]))) or 'none'}): {info[i]['text']}"
        + (f" value={info[i]['value']!r}" if info[i]["value"] is not None else "")
        for i in members
    ]
    return f"Key: {key}\n" + "\n".join(lines)


def check(data: dict, members: list[int], info: dict) -> str:
    """Code rules beyond the schema: '' if the reply may be used, else why not."""
    winner = data.get("winner")
    if winner not in members:
        return f"winner {winner!r} is not one of the conflicting memories"
    if not str(data.get("reason", "")).strip():
        return "no reason given"
    if info[winner].get("pinned") is False and any(info[i].get("pinned") for i in members):
        return "a pinned memory always wins"
    return ""
