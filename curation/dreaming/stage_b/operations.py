"""Stage B's operations as one table: per kind, the code rules that check a proposed operation
(`check`: pure, over what the scan opened; raise rules.Dropped naming the rule) and how a checked
one is applied (`apply`: through the existing services, inside the run's transaction; a service
that refuses raises a DomainError). `check` and `check_one` walk the checks; the run's services
call `apply_one` for each operation that passed."""

import datetime
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction

from curation.dreaming.runs import ACTOR
from curation.dreaming.stage_b.rules import (
    MULTI_STEP,
    VERSION,
    Dropped,
    Opened,
    conditional,
    distinct_evidence,
    entry_ref,
    entry_store,
    parse_date,
    sources_of,
    store_allows,
)
from knowledge.entries import services as entry_services
from knowledge.errors import DomainError, Invalid
from knowledge.models import Entry, Memory, Skill
from memory.lifecycle.activation_hooks import DREAMING
from memory.matching.kept import claims_kept
from memory.recall.memo import memo_update
from memory.skills.services import lesson_add

OPERATIONS_APPLIED, SKILL_UPDATES = "operations", "skill_updates"  # the run's two counters


@dataclass(frozen=True)
class Operation:
    """One kind of operation: `check(op, out, opened, created, *, run, today)` returns `out` (a
    copy of `op`) normalised, `apply(run, agent, op, created)` writes it, and `counts` names the
    run's counter it adds to."""

    check: Callable[..., dict]
    apply: Callable[..., None]
    counts: str = OPERATIONS_APPLIED


def _author(run) -> dict:
    return {"author_kind": "dreaming", "author_name": f"run {run.pk}"}


def _entry(ref, created: dict[str, Entry]) -> Entry:
    if isinstance(ref, int):
        entry = Entry.objects.filter(pk=ref).first()
        if entry is None:  # deleted by a person while the model was reading
            raise Invalid({"entry": [f"entry {ref} no longer exists"]})
        return entry
    if ref not in created:
        raise Invalid({"entry": [f"entry {ref!r} was not created (its create_entry was dropped)"]})
    return created[ref]


# --- create_entry, update_entry -----------------------------------------------------------------


def _check_create_entry(op, out, opened: Opened, created, *, run, today):
    name = (op.get("name") or "").strip()
    if not name:
        raise Dropped("an entry needs a name")
    if name.lower() in created:
        raise Dropped(f"entry {name!r} is created twice")
    if (op.get("type") or "").lower() not in opened.types:
        raise Dropped(
            f"type {op.get('type')!r} is not in the curation guide's taxonomy ({', '.join(opened.types)})"
        )
    store = op.get("store") or "shared"
    if store not in opened.stores:
        raise Dropped(f"store {store!r} is not one of the agent's stores")
    out["store"] = store
    created[name.lower()] = store
    return out


def _apply_create_entry(run, agent, op, created):
    entry = entry_services.entry_create(
        actor=ACTOR,
        owner=agent,
        store=op["store"],
        name=op["name"],
        type=op.get("type", ""),
        aliases=op.get("aliases") or [],
        summary=op.get("summary", ""),
        properties=op.get("properties"),
    )
    created[op["name"].strip().lower()] = entry


def _check_update_entry(op, out, opened: Opened, created, *, run, today):
    out["entry"] = entry_ref(op.get("entry"), opened, created)
    if not isinstance(out["entry"], int):
        raise Dropped("update_entry names an entry created in this run: set its fields when creating it")
    fields = {k for k in ("name", "type", "aliases", "summary", "properties") if k in op}
    if not fields:
        raise Dropped("update_entry changes nothing")
    if "type" in op and (op["type"] or "").lower() not in opened.types:
        raise Dropped(f"type {op['type']!r} is not in the curation guide's taxonomy")
    return out


def _apply_update_entry(run, agent, op, created):
    fields = {k: op[k] for k in entry_services.ENTRY_FIELDS if k in op}
    entry_services.entry_update(actor=ACTOR, entry_id=op["entry"], **fields)


# --- blocks ---------------------------------------------------------------------------------------


def _check_block(op, out, opened: Opened, created, *, run, today):
    """What a new block and a revised one share: an entry, a text, sources the scan opened in
    the entry's store (or shared), the kind's evidence rule, and parsed validity dates."""
    ref = out["entry"] = entry_ref(op.get("entry"), opened, created)
    if not (op.get("text") or "").strip():
        raise Dropped("a block needs a text")
    stored, messages = sources_of(op, opened)
    if not stored:
        raise Dropped("a block must cite at least one source the scan opened")
    store_allows(entry_store(ref, opened, created), messages, opened)
    block_kind = op.get("kind") or "observation"
    out["kind"] = block_kind
    if block_kind == "induction" and not distinct_evidence([opened.messages[m] for m in messages]):
        raise Dropped(
            "an induction needs at least two pieces of evidence: messages from different conversations or times"
        )
    if block_kind == "deduction":
        premises = [p for p in op.get("premises") or [] if p.strip()]
        if not premises:
            raise Dropped("a deduction must name its premises")
        out["text"] = conditional(op["text"], premises, run=run, today=today)
    out["sources"] = stored
    out["valid_from"] = parse_date(op.get("valid_from"), "valid_from")
    out["valid_to"] = parse_date(op.get("valid_to"), "valid_to")
    return ref


def _check_add_block(op, out, opened: Opened, created, *, run, today):
    ref = _check_block(op, out, opened, created, run=run, today=today)
    if "closes" in op:
        if not isinstance(ref, int) or op["closes"] not in opened.entries[ref]["blocks"]:
            raise Dropped(f"block {op['closes']} is not a block of entry {ref}")
        if opened.entries[ref]["blocks"][op["closes"]] is not None:
            raise Dropped(f"block {op['closes']} is already closed")
        if out["valid_from"] is None:
            raise Dropped("a block that closes another needs valid_from: when the fact changed")
    if out["valid_from"] and out["valid_to"] and out["valid_to"] < out["valid_from"]:
        raise Dropped("valid_to is before valid_from")
    return out


def _apply_add_block(run, agent, op, created):
    entry = _entry(op["entry"], created)
    if op.get("closes"):
        entry_services.block_close(
            actor=ACTOR,
            entry_id=entry.pk,
            block_id=op["closes"],
            valid_to=op["valid_from"],
            reason=op.get("reason") or f"the fact changed: a new block of Dreaming run {run.pk} follows it",
        )
    entry_services.block_add(
        actor=ACTOR,
        entry_id=entry.pk,
        text=op["text"].strip(),
        sources=op["sources"],
        route=DREAMING,
        fields={
            "tier": Memory.SEMANTIC,
            "category": op["kind"],
            "valid_from": op["valid_from"],
            "valid_to": op["valid_to"],
            **_author(run),
        },
        audit_data={
            "tier": Memory.SEMANTIC,
            "sources": len(op["sources"]),
            "kind": op["kind"],
            "closes": op.get("closes"),
            "job": VERSION,
        },
    )
    Entry.objects.filter(pk=entry.pk).update(**_author(run))


def _check_revise_block(op, out, opened: Opened, created, *, run, today):
    ref = _check_block(op, out, opened, created, run=run, today=today)
    if not isinstance(ref, int) or op.get("block") not in opened.entries[ref]["blocks"]:
        raise Dropped(f"block {op.get('block')} is not a block of an opened entry")
    if not (op.get("reason") or "").strip():
        raise Dropped("a revision needs a reason")
    if out["valid_from"] or out["valid_to"] or "closes" in op:
        raise Dropped(
            "a revision may not change a block's validity: a changed fact closes the old "
            "block (add_block with closes) and opens a new one"
        )
    kept, why = claims_kept([opened.entries[ref]["texts"][op["block"]]], out["text"])
    if not kept:  # a better wording of the same fact: every claim stays, in its role
        raise Dropped(f"a revision must keep every claim of the block ({why})")
    return out


def _apply_revise_block(run, agent, op, created):
    entry_services.block_correct(
        actor=ACTOR,
        entry_id=op["entry"],
        block_id=op["block"],
        text=op["text"],
        reason=op["reason"],
        sources=op["sources"],
    )


def _check_remove_block(op, out, opened: Opened, created, *, run, today):
    ref = out["entry"] = entry_ref(op.get("entry"), opened, created)
    if not isinstance(ref, int) or op.get("block") not in opened.entries[ref]["blocks"]:
        raise Dropped(f"block {op.get('block')} is not a block of an opened entry")
    if not (op.get("reason") or "").strip():
        raise Dropped("removing a block needs a reason")
    return out


def _apply_remove_block(run, agent, op, created):
    entry_services.block_remove(actor=ACTOR, entry_id=op["entry"], block_id=op["block"], reason=op["reason"])


# --- relations, the memo, lessons -----------------------------------------------------------------


def _check_add_relation(op, out, opened: Opened, created, *, run, today):
    ref = out["entry"] = entry_ref(op.get("entry"), opened, created)
    out["target"] = entry_ref(op.get("target"), opened, created, "target")
    if not (op.get("predicate") or "").strip():
        raise Dropped("a relation needs a predicate")
    stored, messages = sources_of(op, opened)
    if not messages:
        raise Dropped("a relation is written only when a cited message states it; it cites none")
    quote = " ".join((op.get("quote") or "").split()).lower()
    if not quote:
        raise Dropped("a relation must quote the words of its source that state it")
    stating = [m for m in messages if quote in " ".join(opened.messages[m].text.split()).lower()]
    if not stating:
        raise Dropped(
            "the quote is not in any cited message: an inferred relation never becomes a graph edge"
        )
    store_allows(entry_store(ref, opened, created), stating, opened)
    out["sources"] = [{"kind": "message", "ref": str(m)} for m in stating]
    out["valid_from"] = parse_date(op.get("valid_from"), "valid_from")
    out["valid_to"] = parse_date(op.get("valid_to"), "valid_to")
    return out


def _apply_add_relation(run, agent, op, created):
    entry = _entry(op["entry"], created)
    target = _entry(op["target"], created)
    entry_services.relation_add(
        actor=ACTOR,
        entry_id=entry.pk,
        predicate=op["predicate"],
        target_id=target.pk,
        sources=op["sources"],
        valid_from=op["valid_from"].date() if op["valid_from"] else None,
        valid_to=op["valid_to"].date() if op["valid_to"] else None,
    )


def _check_rewrite_memo(op, out, opened: Opened, created, *, run, today):
    if not (op.get("text") or "").strip():
        raise Dropped("the memo may not be emptied by Dreaming")
    return out


def _apply_rewrite_memo(run, agent, op, created):
    memo_update(actor=ACTOR, agent=agent, text=op["text"], reason=f"compacted by Dreaming run {run.pk}")


def _plain_success(outcome: dict) -> bool:
    return outcome["result"] == "success" and not outcome["correction"] and len(outcome["steps"]) < MULTI_STEP


def _check_revise_lesson(op, out, opened: Opened, created, *, run, today):
    skill = op.get("skill") or ""
    if skill not in opened.skills:
        raise Dropped(f"skill {skill!r} is not enabled for this agent (Dreaming creates no skill)")
    if not (op.get("text") or "").strip():
        raise Dropped("a lesson needs a text")
    stored, messages = sources_of(op, opened, lesson=True)
    if not stored:
        raise Dropped("a lesson must cite the task outcome or message it comes from")
    outcomes = [opened.outcomes[int(s["ref"])] for s in stored if s["kind"] == "task_outcome"]
    if not messages and outcomes and all(_plain_success(o) for o in outcomes):
        raise Dropped(
            "a plain success alone never becomes a lesson (a correction, a recovery or a "
            "non-obvious multi-step success can)"
        )
    if "revises" in op and op["revises"] not in opened.skills[skill]:
        raise Dropped(f"lesson {op['revises']} is not a live lesson of skill {skill}")
    out["sources"] = stored
    return out


def _apply_revise_lesson(run, agent, op, created):
    """A lesson that nearly repeats one of the overlay revises it instead."""
    skill = Skill.objects.get(name=op["skill"])
    kwargs = {
        "actor": ACTOR,
        "agent": agent,
        "skill": skill,
        "text": op["text"],
        "sources": op["sources"],
        "route": DREAMING,
        **_author(run),
    }
    try:
        with transaction.atomic():
            lesson_add(**kwargs, revises=op.get("revises"))
    except DomainError as exc:
        twin = exc.extra.get("duplicate_of")
        if twin is None or op.get("revises") == twin:
            raise
        lesson_add(**kwargs, revises=twin)


OPERATIONS: dict[str, Operation] = {
    "create_entry": Operation(_check_create_entry, _apply_create_entry),
    "update_entry": Operation(_check_update_entry, _apply_update_entry),
    "add_block": Operation(_check_add_block, _apply_add_block),
    "revise_block": Operation(_check_revise_block, _apply_revise_block),
    "remove_block": Operation(_check_remove_block, _apply_remove_block),
    "add_relation": Operation(_check_add_relation, _apply_add_relation),
    "rewrite_memo": Operation(_check_rewrite_memo, _apply_rewrite_memo),
    "revise_lesson": Operation(_check_revise_lesson, _apply_revise_lesson, counts=SKILL_UPDATES),
}


def check_one(op: dict, opened: Opened, created: dict[str, str], *, run: int, today: datetime.date) -> dict:
    """Apply the code rules to one schema-valid operation; return it normalised (sources as
    stored, dates parsed, a deduction's conditional text) or raise Dropped naming the rule."""
    out = dict(op)
    if isinstance(op.get("properties"), list):
        out["properties"] = {p["name"].strip(): p["value"] for p in op["properties"] if p["name"].strip()}
    return OPERATIONS[op["op"]].check(op, out, opened, created, run=run, today=today)


def check(operations: list[dict], opened: Opened, *, run: int, today: datetime.date):
    """Split the operations into those to apply (normalised, in order) and those dropped
    ({"op": position, "kind", "reason"})."""
    kept, dropped, created = [], [], {}
    for i, op in enumerate(operations, 1):
        try:
            kept.append((i, check_one(op, opened, created, run=run, today=today)))
        except Dropped as exc:
            dropped.append({"op": i, "kind": op["op"], "reason": str(exc)})
    return kept, dropped


def apply_one(run, agent, op: dict, created: dict[str, Entry]) -> str:
    """Apply one checked operation; returns the run counter it adds to. `created` maps the names
    of entries this run created to their rows, for the operations that name them."""
    operation = OPERATIONS[op["op"]]
    operation.apply(run, agent, op, created)
    return operation.counts
