"""Stage A's model job, version 1: the prompt, the JSON schema of the reply, and the code rules a
reply must pass before anything is written. Change any of them together and bump VERSION (it is
recorded in every batch's audit event), so an episode can always be traced to the rules that
made it.

One batch is a channel's messages after its cursor, oldest first, of one store. The model cuts
it into episodes (a side branch may be its own), declares noise, and may leave an unfinished
topic at the end for the next batch (`leave_from`: its first message; everything from there on
waits). The rules (`check`):
- every id it cites is a message of this batch (services first name ids from other channels);
- every message before `leave_from` is in exactly one episode or is noise, none after it;
- an episode's evidence (the messages that support its resolution) are its own messages, and an
  episode with a resolution names at least one;
- a full batch (more messages wait behind it) may not be left whole: a topic longer than one
  batch must be cut, or the channel would never move."""

from dataclasses import dataclass, field

VERSION = "stage-a/1"
MESSAGE_CHARS = 1500  # one very long message is cut in the prompt (never in the database)

SCHEMA = {
    "type": "object",
    "properties": {
        "episodes": {
            "type": "array",
            "maxItems": 500,  # as many as a batch has messages (selectors.MAX_BATCH_MESSAGES)
            "items": {
                "type": "object",
                "properties": {
                    "topic": {"type": "string", "minLength": 1, "maxLength": 300, "pattern": r"\S"},
                    "summary": {"type": "string", "minLength": 1, "maxLength": 4000, "pattern": r"\S"},
                    "likely_question": {"type": "string", "maxLength": 1000},
                    "resolution": {"type": "string", "maxLength": 2000},
                    "systems": {
                        "type": "array",
                        "maxItems": 20,
                        "items": {"type": "string", "minLength": 1, "maxLength": 200},
                    },
                    "messages": {"type": "array", "minItems": 1, "items": {"type": "integer"}},
                    "evidence": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["topic", "summary", "likely_question", "resolution", "messages", "evidence"],
                "additionalProperties": False,
            },
        },
        "noise": {"type": "array", "items": {"type": "integer"}},
        "leave_from": {"type": ["integer", "null"]},
    },
    "required": ["episodes", "noise"],
    "additionalProperties": False,
}

SYSTEM = """You index a chat channel for later search. You get a batch of the channel's messages, \
oldest first, under a line with their date; each line starts with the message id (#id), then \
its time (UTC), speaker and thread.

Cut the batch into episodes: one episode per discussion of one topic. A side discussion (for \
example in a thread) may be its own episode. Greetings, thanks, jokes and bot chatter that belong \
to no discussion are noise. For each episode give:
- topic: a few words naming it;
- summary: what was discussed and decided, in 1-4 sentences, naming people and systems;
- likely_question: a question someone may ask later that this episode answers;
- resolution: how it was resolved or answered ("" if it was not);
- systems: the systems, services, tools or error codes named in it ([] if none);
- messages: the ids of all its messages;
- evidence: the ids of the messages that state the resolution ([] if there is none).

Every message id of the batch goes into exactly one episode or into noise, except an unfinished \
topic at the very end of the batch: if the last discussion is still going on, set leave_from to \
the id of its first message; it and every later message are then left for the next batch and go \
nowhere else. Otherwise set leave_from to null.{full_note}

Reply with JSON only: {{"episodes": [{{"topic": "...", "summary": "...", "likely_question": "...", \
"resolution": "...", "systems": ["..."], "messages": [1, 2], "evidence": [2]}}], "noise": [3], \
"leave_from": null}}"""

FULL_NOTE = (
    " This batch is full (more messages follow it): do not leave the whole batch for later; if one "
    "topic fills it, close it as an episode at the end of the batch."
)


@dataclass
class BatchMessage:
    id: int
    ts: object
    speaker: str
    thread: str
    text: str


def line(m: BatchMessage) -> str:
    """How one message appears in the prompt (also what the batch's token budget counts)."""
    text = " ".join(m.text.split())
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS] + " …"
    thread = f" (thread {m.thread})" if m.thread else ""
    return f"#{m.id} {m.ts:%H:%M} {m.speaker}{thread}: {text}"


def prompt(*, channel: str, messages: list[BatchMessage], lines: list[str], full: bool) -> list[dict]:
    """The date is given once per day ("[2026-09-01]" before that day's first message) instead
    of on every line: about 6 tokens less per message."""
    body, day = [], None
    for m, text in zip(messages, lines, strict=True):
        if m.ts.date() != day:
            day = m.ts.date()
            body.append(f"[{day:%Y-%m-%d}]")
        body.append(text)
    return [
        {"role": "system", "content": SYSTEM.format(full_note=FULL_NOTE if full else "")},
        {"role": "user", "content": f"Channel {channel}, {len(lines)} messages:\n" + "\n".join(body)},
    ]


class Invalid(ValueError):
    """The reply passed the schema but breaks a rule; its text says which, for people."""


@dataclass
class Cut:
    """A checked reply: the episodes to write, the noise, and where the cursor moves."""

    episodes: list[dict]
    noise: list[int]
    covered: list[int]  # the batch's prefix the cursor moves past, in batch order
    left: list[int] = field(default_factory=list)  # left for the next batch


def check(data: dict, *, batch_ids: list[int], full: bool) -> Cut:
    """Apply the code rules to a schema-valid reply; raise Invalid naming the first broken one."""
    position = {mid: i for i, mid in enumerate(batch_ids)}

    def known(mid: int, where: str) -> int:
        if mid not in position:
            raise Invalid(f"{where} cites message {mid}, which is not in this batch")
        return position[mid]

    leave_from = data.get("leave_from")
    end = len(batch_ids) if leave_from is None else known(leave_from, "leave_from")
    if end == 0 and full:
        raise Invalid("the whole batch was left for later, but more messages follow it: it must be cut")
    owner: dict[int, str] = {}
    for i, episode in enumerate(data["episodes"], 1):
        for mid in episode["messages"]:
            if known(mid, f"episode {i}") >= end:
                raise Invalid(f"episode {i} includes message {mid}, which was left for the next batch")
            if mid in owner:
                raise Invalid(
                    f"message {mid} is in {owner[mid]} and in episode {i}: episodes may not overlap"
                )
            owner[mid] = f"episode {i}"
        own = set(episode["messages"])
        for mid in episode["evidence"]:
            if mid not in own:
                known(mid, f"episode {i}'s evidence")
                raise Invalid(f"episode {i}'s evidence cites message {mid}, which is not one of its messages")
        if episode["resolution"].strip() and not episode["evidence"]:
            raise Invalid(f"episode {i} has a resolution but no message supporting it")
    for mid in data["noise"]:
        if known(mid, "noise") >= end:
            raise Invalid(f"noise includes message {mid}, which was left for the next batch")
        if mid in owner:
            raise Invalid(f"message {mid} is in {owner[mid]} and in noise")
        owner[mid] = "noise"
    for mid in batch_ids[:end]:
        if mid not in owner:
            raise Invalid(f"message {mid} is in no episode and not noise (and not left for the next batch)")
    return Cut(
        episodes=data["episodes"],
        noise=sorted(set(data["noise"]), key=position.get),
        covered=batch_ids[:end],
        left=batch_ids[end:],
    )
