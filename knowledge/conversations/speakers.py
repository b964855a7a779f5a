"""Who said a message: the speaker a message names, turned into an agent or a person.

A speaker is a display name as chat exports write it ("Fahim Khan", "José", "李雷"), optionally
prefixed `person:` or `agent:`: any non-empty name up to MAX_SPEAKER characters without control
characters. A name that is an agent's, in any letter case, is that agent (`AGENTA` is agent
`agenta`), so "an agent speaks only for itself" (`access.check_speaker`) cannot be passed with a
look-alike; `agent:` must name one. A name that only *looks* like an agent's — the same after
Unicode compatibility folding (NFKC), case folding and the Unicode confusables map ("аgenta" with
a Cyrillic а, fullwidth "ａｇｅｎｔａ") — is refused: it would read as that agent's turn. Agent,
person and integration names are ASCII slugs, so among them letter case is the only look-alike.
Anyone else is a person, found or created under a name a
store and a URL can hold (the display name when it is already one, else its ASCII slug, else a
name derived from it), the display name kept on the person and on each message."""

import hashlib
import re
import unicodedata

import confusables
from django.db.models.functions import Lower
from django.utils.text import slugify

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.errors import Invalid
from knowledge.models import Agent, Person
from knowledge.principal import Principal

MAX_SPEAKER = 64  # Message.speaker_name
PREFIXES = ("person", "agent")
PERSON_NAME = re.compile(r"[-a-zA-Z0-9_]{1,64}")  # Person.name, a SlugField


def speaker_parts(raw: str) -> tuple[str, str]:
    """(`person`, `agent` or "" when not said, the display name)."""
    prefix, sep, rest = raw.partition(":")
    if sep and prefix in PREFIXES:
        return prefix, rest.strip()
    return "", raw.strip()


def speaker_error(raw) -> str | None:
    """Why `raw` cannot be a speaker, or None."""
    if not isinstance(raw, str):
        return "A speaker is a name."
    _, name = speaker_parts(raw)
    if not name:
        return "A speaker needs a name."
    if len(name) > MAX_SPEAKER:
        return f"A speaker's name has at most {MAX_SPEAKER} characters."
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in name):
        return "A speaker's name holds no control characters."
    return None


def folded_forms(name: str) -> set[str]:
    """The spellings `name` may be read as: NFKC, case-folded, every confusable letter replaced
    by the character it imitates (Unicode's confusables table, letters first)."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return {folded, *confusables.normalize(folded, prioritize_alpha=True)}


def _look_alikes(names: set[str]) -> dict[str, str]:
    """name -> the agent it imitates, for the names among `names` that are not an agent's name in
    any letter case but fold to one (only names with a non-ASCII character can)."""
    odd = {n: folded_forms(n) for n in names if not n.isascii()}
    if not odd:
        return {}
    agents = {name.lower(): name for name in Agent.objects.values_list("name", flat=True)}
    out = {}
    for name, forms in odd.items():
        if name.lower() in agents:
            continue
        hit = sorted(agents[f] for f in forms if f in agents)
        if hit:
            out[name] = hit[0]
    return out


def person_name_for(display: str) -> str:
    """The Person.name a display name is stored under: itself when it is one already (the
    names people were always given), else its ASCII slug ("Fahim Khan" → fahim-khan), else one
    derived from it (a name with no ASCII letters)."""
    if PERSON_NAME.fullmatch(display):
        return display
    slug = slugify(display)[:MAX_SPEAKER].strip("-_")
    if slug:
        return slug
    return "person-" + hashlib.sha256(display.encode()).hexdigest()[:12]


def speakers_resolve(actor: Principal, raws: set[str]) -> dict[str, tuple[str, int, str]]:
    """raw speaker -> ("agent" | "person", id, the name the message shows). Every speaker is
    checked, and every one naming an agent is one `actor` may speak as, before anything is
    written; unknown people are then created (and audited)."""
    parts = {}
    for raw in sorted(raws):
        problem = speaker_error(raw)
        if problem:
            raise Invalid({"speaker": [f"{raw!r}: {problem}"]})
        parts[raw] = speaker_parts(raw)
    look_alikes = _look_alikes({name for _, name in parts.values()})
    if look_alikes:
        name, agent = min(look_alikes.items())
        raise Invalid({"speaker": [f"{name!r} looks like agent {agent}'s name: name a person another way."]})
    wanted = {name.lower() for _, name in parts.values()}
    matches: dict[str, list[tuple[str, int]]] = {}
    for name, pk in (
        Agent.objects.annotate(folded=Lower("name"))
        .filter(folded__in=wanted)
        .order_by("pk")
        .values_list("name", "pk")
    ):
        matches.setdefault(name.lower(), []).append((name, pk))

    def agent_of(name: str) -> tuple[str, int] | None:
        found = matches.get(name.lower(), [])
        exact = [m for m in found if m[0] == name]
        return (exact or found or [None])[0]

    for kind, name in sorted(set(parts.values())):
        agent = agent_of(name)
        if kind == "agent" and agent is None:
            raise Invalid({"speaker": [f"Unknown agent {name}."]})
        if agent is not None:
            # Even as `person:<name>`: the history section shows a turn by its speaker's name.
            access.check_speaker(actor, agent_id=agent[1], name=agent[0])

    out, people = {}, {}
    for raw, (kind, name) in parts.items():
        agent = agent_of(name)
        if agent is not None and kind != "person":
            out[raw] = ("agent", agent[1], agent[0])
        else:
            people[raw] = name
    if people:
        ids = _people(actor, {person_name_for(n): n for n in people.values()})
        out.update({raw: ("person", ids[person_name_for(name)], name) for raw, name in people.items()})
    return out


def _people(actor: Principal, display: dict[str, str]) -> dict[str, int]:
    """Person.name -> id for these names, creating (and auditing) the unknown ones with their
    display name."""
    ids = dict(Person.objects.filter(name__in=display).values_list("name", "pk"))
    missing = sorted(set(display) - set(ids))
    if missing:
        Person.objects.bulk_create(
            [Person(name=n, display_name=display[n] if display[n] != n else "") for n in missing],
            ignore_conflicts=True,
        )
        created = dict(Person.objects.filter(name__in=missing).values_list("name", "pk"))
        ids.update(created)
        audit_record(
            "person.created",
            actor=actor,
            object_type="person",
            object_ids=sorted(created.values()),
            reason="speaker of an ingested message",
            counts={"people": len(created)},
        )
    return ids
