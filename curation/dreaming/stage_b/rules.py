"""Stage B's model job, version 1: the two prompts (scan, propose), the JSON schemas of their
replies, and the code rules every proposed operation must pass before it is applied. Change any
of them together and bump VERSION (it is recorded on every run's audit events), so a block can
always be traced to the rules that wrote it.

A run reads one agent's new material: episode summaries past its cursor, its new task outcomes,
and a light index of its current entries. The scan call picks what to open; the propose call
sees the opened source messages, entries (their projection), enabled skills with their overlays
and the agent's curation guide, and returns operations. Output that fails a schema writes
nothing. An operation that breaks a rule below is dropped and recorded on the run with its
reason; the others still apply (`operations.check`):

- every block cites at least one source the scan opened (a message, an episode — stored as its
  supporting messages — or a task outcome); an `induction` cites at least two messages from
  different conversations or times; a `deduction` names its premises and is stored as a
  conditional with its Dreaming author and date;
- a relation is written only when a cited message states it: the operation quotes the words and
  code checks the quote is in that message; there is no way to propose an inferred edge;
- task outcomes support skill lessons only, never entries, blocks or relations; a plain success
  (no correction, fewer than MULTI_STEP steps) never becomes a lesson;
- a changed fact closes the old block (`closes`: its `valid_to` becomes the new block's
  `valid_from`) and opens a new one — a revision may not move a block's validity; entry types
  come from the curation guide; there is no operation on the guide or on skills themselves;
- everything is written into the agent's own stores, and a block may cite only evidence from its
  entry's store or the shared store (nothing crosses a visibility boundary).

The rules per operation, with how each is applied, are the table in `operations.py`; this module
holds what they share and stays free of the database."""

import datetime
from dataclasses import dataclass, field

VERSION = "stage-b/3"
MULTI_STEP = 3  # a success with at least this many steps may be a non-obvious procedure
INDUCTION_GAP = datetime.timedelta(hours=1)  # two messages this far apart are different times
TEXT_CHARS = 1500  # one very long message is cut in the prompt (never in the database)
MAX_OPERATIONS = 200

KINDS = ("observation", "induction", "deduction")
OPS = (
    "create_entry",
    "update_entry",
    "add_block",
    "revise_block",
    "remove_block",
    "add_relation",
    "rewrite_memo",
    "revise_lesson",
)
SOURCE_KINDS = ("message", "episode", "task_outcome")

_ids = {"type": "array", "maxItems": 200, "items": {"type": "integer"}}
SCAN_SCHEMA = {
    "type": "object",
    "properties": {"episodes": _ids, "outcomes": _ids, "entries": _ids},
    "required": ["episodes", "outcomes", "entries"],
    "additionalProperties": False,
}

_str = {"type": "string", "maxLength": 20000}
_ref = {"type": ["integer", "string"]}
PROPOSE_SCHEMA = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "maxItems": MAX_OPERATIONS,
            "items": {
                "type": "object",
                "properties": {
                    "op": {"enum": list(OPS)},
                    "entry": _ref,
                    "name": {"type": "string", "maxLength": 300},
                    "type": {"type": "string", "maxLength": 64},
                    "aliases": {
                        "type": "array",
                        "maxItems": 50,
                        "items": {"type": "string", "maxLength": 300},
                    },
                    "summary": _str,
                    # name/value pairs, not a free-form object: a free-form object is not in the
                    # portable subset of structured output (knowledge/llm/wire.py).
                    "properties": {
                        "type": "array",
                        "maxItems": 50,
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string", "minLength": 1, "maxLength": 100},
                                "value": {"type": "string", "maxLength": 2000},
                            },
                            "required": ["name", "value"],
                            "additionalProperties": False,
                        },
                    },
                    "store": {"type": "string", "maxLength": 120},
                    "block": {"type": "integer"},
                    "closes": {"type": "integer"},
                    "text": _str,
                    "kind": {"enum": list(KINDS)},
                    "premises": {
                        "type": "array",
                        "maxItems": 20,
                        "items": {"type": "string", "maxLength": 1000},
                    },
                    "valid_from": {"type": ["string", "null"], "maxLength": 40},
                    "valid_to": {"type": ["string", "null"], "maxLength": 40},
                    "reason": {"type": "string", "maxLength": 2000},
                    "sources": {
                        "type": "array",
                        "maxItems": 50,
                        "items": {
                            "type": "object",
                            "properties": {"kind": {"enum": list(SOURCE_KINDS)}, "ref": {"type": "integer"}},
                            "required": ["kind", "ref"],
                            "additionalProperties": False,
                        },
                    },
                    "predicate": {"type": "string", "maxLength": 100},
                    "target": _ref,
                    "quote": {"type": "string", "maxLength": 2000},
                    "skill": {"type": "string", "maxLength": 64},
                    "revises": {"type": "integer"},
                },
                "required": ["op"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["operations"],
    "additionalProperties": False,
}

SCAN_SYSTEM = """You curate the long-term memory of the agent {agent}. Below is what is new since \
its last curation: episode summaries from conversations it takes part in (#id, date, channel, \
topic, summary), its new task outcomes (#id, skill, result), and an index of its current \
knowledge entries (#id, name, type, aliases, summary).

Pick only what may change what the agent should believe or how it should work: the episodes \
whose source messages should be read, the task outcomes worth a lesson (a correction, a \
recovery, a non-obvious multi-step success; never a plain success), and the entries those \
touch. Pick nothing when nothing matters.

Use only the ids listed above. Reply with JSON only, in this shape: {{"episodes": [<episode \
id>, …], "outcomes": [<task outcome id>, …], "entries": [<entry id>, …]}}"""

PROPOSE_SYSTEM = """You curate the long-term memory of the agent {agent}: decide what it should \
believe now. You see source messages (#id, time UTC, speaker: text), task outcomes, the current \
entries (#id, with their blocks as [block #id, kind, validity]), the enabled skills with their \
lessons, and the curation guide. Today is {today}.

Return operations (JSON). Each one:
- create_entry: name, type (one of: {types}), aliases, summary, store (one of: {stores}); then \
add blocks with "entry" set to its name.
- update_entry: entry (id), any of name, type, aliases, summary, properties ([{{"name": …, \
"value": …}}]).
- add_block: entry (id or the name of an entry created above), text, kind (observation | \
induction | deduction), sources ([{{"kind": "message" | "episode", "ref": id}}]), valid_from, \
valid_to (YYYY-MM-DD or null). When a fact changed, do not rewrite the old block: add the new \
one with "closes": the old block's id and valid_from: when it changed; the old block is then \
closed at that date and both stay, each with its sources.
- revise_block: entry, block, text, reason, sources — a better wording of the same fact only.
- remove_block: entry, block, reason — for a block that was wrong, not for one that changed.
- add_relation: entry, predicate, target (entry id or name), sources (the one message that \
states it), quote (the exact words of that message that state it). Never a relation you inferred.
- rewrite_memo: text — the pinned memo, at most {memo_budget} tokens: only rules that must apply \
every turn.
- revise_lesson: skill (an enabled skill's name), text, sources (task outcomes or messages), \
revises (the id of the lesson it replaces, when one says nearly the same).

Rules: every block cites what you were shown. An induction (a pattern, preference or rule) needs \
at least two messages from different conversations or times. A deduction names its premises \
("premises": [...]) and stays conditional. Task outcomes support lessons only, never entries. \
Keep time, speaker and unresolved disagreement visible; the newest statement does not simply \
win. Do not store temporary state, one-off errors or guesses. An empty list is a fine answer.

Reply with JSON only: {{"operations": [...]}}"""


def scan_breach(data: dict, *, episodes: set, outcomes: set, entries: set) -> str:
    """A scan may pick only ids it was shown: any other id (the prompt's example, an id from
    elsewhere) fails the reply ("" when every id is known)."""
    for kind, shown in (("episodes", episodes), ("outcomes", outcomes), ("entries", entries)):
        unknown = sorted(set(data[kind]) - shown)
        if unknown:
            return f"{kind} {', '.join(map(str, unknown[:5]))} {'was' if len(unknown) == 1 else 'were'} not shown"
    return ""


def cut(text: str) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + " …"


def scan_prompt(*, agent: str, episodes: list[str], outcomes: list[str], entries: list[str]) -> list[dict]:
    body = ["Episodes:", *(episodes or ["(none)"]), "", "Task outcomes:", *(outcomes or ["(none)"])]
    body += ["", "Entries:", *(entries or ["(none)"])]
    return [
        {"role": "system", "content": SCAN_SYSTEM.format(agent=agent)},
        {"role": "user", "content": "\n".join(body)},
    ]


def propose_prompt(
    *,
    agent: str,
    today: datetime.date,
    types: list[str],
    stores: list[str],
    memo_budget: int,
    sections: dict[str, list[str]],
) -> list[dict]:
    body = []
    for title, lines in sections.items():
        body += [f"{title}:", *(lines or ["(none)"]), ""]
    system = PROPOSE_SYSTEM.format(
        agent=agent,
        today=today.isoformat(),
        types=", ".join(types),
        stores=", ".join(stores),
        memo_budget=memo_budget,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(body).strip()}]


# --- what the scan opened, and the rules --------------------------------------------------------


@dataclass
class Evidence:
    """One opened message."""

    id: int
    store: str
    place: str  # channel and thread: messages of different places are different conversations
    ts: datetime.datetime
    text: str


@dataclass
class Opened:
    """Everything the operations may cite or touch, as the scan opened it."""

    agent_id: int
    messages: dict[int, Evidence] = field(default_factory=dict)
    episodes: dict[int, list[int]] = field(default_factory=dict)  # episode → the messages it stands for
    outcomes: dict[int, dict] = field(default_factory=dict)  # id → {skill, result, steps, correction}
    entries: dict[int, dict] = field(default_factory=dict)  # id → {store, blocks: {id: valid_to}, texts}
    types: list[str] = field(default_factory=list)
    stores: list[str] = field(default_factory=list)
    skills: dict[str, list[int]] = field(default_factory=dict)  # enabled skill → live lesson ids


class Dropped(ValueError):
    """An operation breaks a rule; its text says which, for people."""


def parse_date(value, what: str) -> datetime.datetime | None:
    if value in (None, ""):
        return None
    try:
        day = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        raise Dropped(f"{what} is not a date ({value!r})") from None
    if day.tzinfo is None:
        day = day.replace(tzinfo=datetime.UTC)
    return day


def sources_of(op: dict, opened: Opened, *, lesson: bool = False) -> tuple[list[dict], list[int]]:
    """The op's sources as stored ({kind, ref}) and the messages behind them. An episode is
    stored as the messages that support it: it is a navigation aid, the messages are evidence."""
    stored, messages = [], []
    for s in op.get("sources") or []:
        kind, ref = s["kind"], s["ref"]
        if kind == "message":
            if ref not in opened.messages:
                raise Dropped(f"it cites message {ref}, which the scan did not open")
            messages.append(ref)
        elif kind == "episode":
            if ref not in opened.episodes:
                raise Dropped(f"it cites episode {ref}, which the scan did not open")
            messages += opened.episodes[ref]
        else:
            if not lesson:
                raise Dropped(
                    f"it cites task outcome {ref}: a task outcome proves only how a task went, "
                    "never a claim about the world"
                )
            if ref not in opened.outcomes:
                raise Dropped(f"it cites task outcome {ref}, which the scan did not open")
            stored.append({"kind": "task_outcome", "ref": str(ref)})
    messages = list(dict.fromkeys(messages))
    stored += [{"kind": "message", "ref": str(m)} for m in messages]
    return stored, messages


def store_allows(store: str, messages: list[int], opened: Opened) -> None:
    for mid in messages:
        found = opened.messages[mid].store
        if found not in ("shared", store):
            raise Dropped(f"message {mid} is in store {found}: it may not support knowledge in store {store}")


def distinct_evidence(messages: list[Evidence]) -> bool:
    """Two messages from different conversations (channel or thread) or times."""
    for i, a in enumerate(messages):
        for b in messages[i + 1 :]:
            if a.place != b.place or abs(a.ts - b.ts) >= INDUCTION_GAP:
                return True
    return False


def conditional(text: str, premises: list[str], *, run: int, today: datetime.date) -> str:
    """How a deduction is stored: conditional on its premises, with its author and date."""
    text = text.strip().rstrip(".")
    given = "; ".join(p.strip().rstrip(".") for p in premises)
    return f"If {given}: {text}. (Deduced by Dreaming run {run} on {today.isoformat()}.)"


def entry_ref(value, opened: Opened, created: dict[str, str], what: str = "entry"):
    """An entry id the scan opened, or the name of an entry this run creates."""
    if isinstance(value, int):
        if value not in opened.entries:
            raise Dropped(f"{what} {value} is not an entry the scan opened")
        return value
    if isinstance(value, str) and value.strip().lower() in created:
        return value.strip().lower()
    raise Dropped(f"{what} {value!r} is neither an opened entry nor one created earlier in this run")


def entry_store(ref, opened: Opened, created: dict[str, str]) -> str:
    return opened.entries[ref]["store"] if isinstance(ref, int) else created[ref]
