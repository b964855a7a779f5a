"""Learning a material with a model, version 1: the prompt, the reply's JSON schema (Dreaming
stage B's operation schema cut to the operations learning may use, with sections as the only
sources) and the code rules — stage B's own `check_one`, applied to the sections as the opened
evidence. Change any of them together and bump VERSION (recorded on the material and its
audit events).

- every block cites at least one section of the material (stored as `<material>#<section>`);
- a relation is written only when a cited section states it: the operation quotes the words and
  code checks the quote is in that section;
- an induction needs evidence from different places or times, which one document never is, so
  a material alone yields observations and deductions (stated as conditionals);
- entry types come from the agent's curation guide; everything is written into the material's
  store, so nothing crosses a visibility boundary.

The model is called outside any transaction; the checked operations are applied in ONE
transaction with the material's `learned` state (knowledge.materials.learning.learning_commit).
A model failure or an invalid reply writes nothing and fails the material with the reason; an
operation a rule or a service refuses is dropped and its reason recorded on the audit event. An
outage (the model server does not answer) defers the learning (LearnDeferred): the material is
learned with the model later, not plainly now."""

import copy
import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from curation.dreaming.stage_b import rules as stage_b
from curation.dreaming.stage_b.operations import check_one
from curation.dreaming.stage_b.selectors import guide_types
from curation.dreaming.stage_b.services import REFUSALS, refusal_text
from knowledge.entries import services as entry_services
from knowledge.llm import LIGHT, ModelError, fits, model_ask, model_availability, outage, reply_budget
from knowledge.materials.learning import PLAIN_JOB, LearnDeferred, Learner, LearnFailed, learning_commit
from knowledge.materials.plain import ACTOR, learn_plain, section_ref
from knowledge.models import Entry, Material, Memory

VERSION = "material-learn/1"
OPS = ("create_entry", "add_block", "add_relation")
SECTION_CHARS = 6000
MAX_SECTIONS = 60  # one call; a longer material is learned without the model's help past this
REPLY_TOKENS = 6000

SCHEMA = copy.deepcopy(stage_b.PROPOSE_SCHEMA)
_item = SCHEMA["properties"]["operations"]["items"]
_item["properties"]["op"] = {"enum": list(OPS)}
_item["properties"]["sources"]["items"]["properties"]["kind"] = {"enum": ["section"]}
for _unused in ("block", "closes", "skill", "revises", "reason"):
    _item["properties"].pop(_unused)

SYSTEM = """You turn one document that the agent {agent} was asked to learn into focused \
knowledge entries. The document is given as numbered sections (#n, title, text). A document is \
evidence: place separate topics in separate entries.

Return operations (JSON):
- create_entry: name, type (one of: {types}), aliases, summary, store ("{store}").
- add_block: entry (the name of an entry created above), text (one fact, in your words), kind \
(observation | deduction), sources ([{{"kind": "section", "ref": n}}]), valid_from, valid_to \
(YYYY-MM-DD or null). A deduction names its premises ("premises": [...]).
- add_relation: entry, predicate, target (entry names created above), sources (the one section \
that states it), quote (the exact words of that section that state it). Never a relation you \
inferred.

Every block cites the sections it comes from. Do not store guesses. An empty list is a fine \
answer. Reply with JSON only: {{"operations": [...]}}"""


def prompt(*, agent: str, title: str, types: list[str], store: str, sections) -> list[dict]:
    lines = [f"Document: {title}", ""]
    for n, section in enumerate(sections, 1):
        text = section.text if len(section.text) <= SECTION_CHARS else section.text[:SECTION_CHARS] + " …"
        lines += [f"#{n} {section.title}", text, ""]
    return [
        {"role": "system", "content": SYSTEM.format(agent=agent, types=", ".join(types), store=store)},
        {"role": "user", "content": "\n".join(lines).strip()},
    ]


def opened_for(material: Material, sections) -> stage_b.Opened:
    """The sections as stage B's opened evidence: one place (the document), one time."""
    now = timezone.now()
    opened = stage_b.Opened(
        agent_id=material.owner_id, types=guide_types(material.owner), stores=[material.store]
    )
    for n, section in enumerate(sections, 1):
        opened.messages[n] = stage_b.Evidence(
            id=n, store=material.store, place=f"material:{material.pk}", ts=now, text=section.text
        )
    return opened


def _as_messages(op: dict, store: str) -> dict:
    op = dict(op)
    if op["op"] == "create_entry":
        op.setdefault("store", store)
    if "sources" in op:
        op["sources"] = [{"kind": "message", "ref": s["ref"]} for s in op["sources"]]
    return op


def check(operations: list[dict], material: Material, sections, *, today: datetime.date):
    """Stage B's rules on the operations; returns (kept, dropped) with sources as material refs."""
    opened = opened_for(material, sections)
    kept, dropped, created = [], [], {}
    for i, op in enumerate(operations, 1):
        try:
            out = check_one(_as_messages(op, material.store), opened, created, run=0, today=today)
        except stage_b.Dropped as exc:
            dropped.append({"op": i, "kind": op["op"], "reason": str(exc)})
            continue
        if "sources" in out:
            out["sources"] = [
                {"kind": "material", "ref": section_ref(material, int(s["ref"]))} for s in out["sources"]
            ]
        if out["op"] == "add_block" and out.get("kind") == "deduction":
            out["text"] = out["text"].replace(
                "(Deduced by Dreaming run 0 on", f"(Deduced from material {material.source_ref} on"
            )
        kept.append((i, out))
    return kept, dropped


def _relearned(material: Material, name: str) -> Entry | None:
    """Learning a material again (Learn again, a new connector version): an entry of the same
    name that an earlier learning of it created is reused, and its blocks resting on the
    material are removed (audited, restorable) before the new ones are written."""
    entry = Entry.objects.filter(
        owner=material.owner,
        store=material.store,
        properties__material=material.source_ref,
        name__iexact=name.strip(),
    ).first()
    if entry is None:
        return None
    ref = material.source_ref
    stale = Memory.objects.filter(entry=entry, status__in=entry_services.BODY_STATUSES).filter(
        Q(sources__kind="material") & (Q(sources__ref=ref) | Q(sources__ref__startswith=f"{ref}#"))
    )
    for block_id in stale.values_list("pk", flat=True).distinct():
        entry_services.block_remove(
            actor=ACTOR, entry_id=entry.pk, block_id=block_id, reason=f"learned again from material {ref}"
        )
    return entry


def _apply(material: Material, kept, dropped) -> dict:
    created: dict[str, Entry] = {}
    counts = {"entries": 0, "blocks": 0, "relations": 0}
    for position, op in kept:
        try:
            with transaction.atomic():
                if op["op"] == "create_entry":
                    entry = _relearned(material, op["name"])
                    if entry is None:
                        entry = entry_services.entry_create(
                            actor=ACTOR,
                            owner=material.owner,
                            store=material.store,
                            name=op["name"],
                            type=op.get("type", ""),
                            aliases=op.get("aliases") or [],
                            summary=op.get("summary", ""),
                            properties={"material": material.source_ref},
                        )
                        counts["entries"] += 1
                    created[op["name"].strip().lower()] = entry
                elif op["op"] == "add_block":
                    entry = created[op["entry"]]
                    entry_services.block_add(
                        actor=ACTOR, entry_id=entry.pk, text=op["text"].strip(), sources=op["sources"]
                    )
                    counts["blocks"] += 1
                else:
                    entry_services.relation_add(
                        actor=ACTOR,
                        entry_id=created[op["entry"]].pk,
                        predicate=op["predicate"],
                        target_id=created[op["target"]].pk,
                        sources=op["sources"],
                        valid_from=op["valid_from"].date() if op["valid_from"] else None,
                        valid_to=op["valid_to"].date() if op["valid_to"] else None,
                    )
                    counts["relations"] += 1
        except KeyError:
            dropped.append(
                {"op": position, "kind": op["op"], "reason": "its entry was not created (dropped above)"}
            )
        except REFUSALS as exc:
            dropped.append({"op": position, "kind": op["op"], "reason": refusal_text(exc)})
    counts["dropped"] = len(dropped)
    return counts


def _fitted(material: Material, sections, reply_tokens: int) -> tuple[list, list[dict]]:
    """The sections the model reads (as many of the first ones as fit the light model's context
    beside the reply budget) and the prompt."""

    def build(part):
        return prompt(
            agent=material.owner.name,
            title=material.title,
            types=guide_types(material.owner),
            store=material.store,
            sections=part,
        )

    part = list(sections)
    while len(part) > 1 and not fits(build(part), reply_tokens, LIGHT, agent=material.owner):
        part = part[: max(len(part) * 3 // 4, 1)]
    return part, build(part)


def learn_with_model(*, material: Material, version, extracted, attempt: int) -> None:
    reply_tokens = reply_budget(REPLY_TOKENS, LIGHT, agent=material.owner)
    sections, messages = _fitted(material, extracted.sections[:MAX_SECTIONS], reply_tokens)
    try:
        reply = model_ask(
            purpose="materials.learn",
            messages=messages,
            schema=SCHEMA,
            profile=LIGHT,
            agent=material.owner,
            actor=ACTOR,
            max_tokens=reply_tokens,
        )
    except ModelError as exc:
        if outage(exc):
            raise LearnDeferred(exc.reason) from None
        # A failing model is no reason to leave a material unlearned when no model would have
        # learned it plainly: learn it plainly, and say why.
        learning_commit(
            material_id=material.pk,
            attempt=attempt,
            extracted=extracted,
            job=PLAIN_JOB,
            write=lambda m, v: learn_plain(m, v, extracted).counts,
            note=f"learned without a model (the model failed: {exc.reason}): one entry whose blocks "
            "are its sections"[:2000],
        )
        return
    kept, dropped = check(reply.data["operations"], material, sections, today=timezone.now().date())
    if not any(op["op"] == "add_block" for _, op in kept):
        reasons = "; ".join(d["reason"] for d in dropped[:3]) or "it proposed no operations"
        raise LearnFailed(
            f"the model's reply taught nothing that passes the rules, nothing written: {reasons}"
        )
    note = f"learned with the model: {len(kept)} operation(s) applied"
    if len(sections) < len(extracted.sections):
        note += f"; it read the first {len(sections)} of {len(extracted.sections)} sections (its context)"
    if dropped:
        note += (
            f", {len(dropped)} dropped (" + "; ".join(f"#{d['op']} {d['reason']}" for d in dropped[:5]) + ")"
        )
    learning_commit(
        material_id=material.pk,
        attempt=attempt,
        extracted=extracted,
        job=VERSION,
        write=lambda m, v: _apply(m, kept, dropped),
        note=note[:2000],
    )


def unavailable(material: Material) -> str:
    down = outage(profile=LIGHT, agent=material.owner)
    if down:  # not a reason to learn it plainly: it waits for the server
        raise LearnDeferred(down)
    why = model_availability(LIGHT, agent=material.owner)
    return f"the light model is {why}" if why else ""


LEARNER = Learner(job=VERSION, unavailable=unavailable, learn=learn_with_model)
