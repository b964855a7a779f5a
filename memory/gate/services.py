"""The eval gate: ask an agent's gate cases twice — without the candidate memory and with it
placed in the prompt exactly as recall places it — and score both answers. A case that passes
without and fails with is a regression.

Modes (BRAIN_MEMORY_ACTIVATION_GATE, run-time changeable): shadow (activation unchanged; checks
queued and run in the background), enforce (checked inside the one activation function; a
regression or a check that could not run keeps the memory queued), off."""

import re
import time

from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import audit_record
from knowledge.llm import ModelError, model_call
from knowledge.models import Memory
from knowledge.principal import Principal
from knowledge.settings_store import CACHE_SECONDS, setting_get
from memory.models import EvalDataset, GateCheck
from memory.recall.context import context_compile, context_text
from memory.recall.scope import store_scope

MAX_CASES = 20
GATE_BUDGET_TOKENS = 2000
SHADOW, ENFORCE, OFF = "shadow", "enforce", "off"


class GateUnavailable(Exception):
    """The check could not run (model not configured, failing or over budget)."""


# --- scoring --------------------------------------------------------------------------------


def score_answer(answer: str, expect: dict) -> list[str]:
    """The expectations `answer` fails (empty list = pass). contains/excludes are
    case-insensitive substrings; regex is re.search."""
    failures = []
    lowered = answer.lower()
    for text in expect.get("contains", []):
        if text.lower() not in lowered:
            failures.append(f"missing {text!r}")
    for pattern in expect.get("regex", []):
        if not re.search(pattern, answer):
            failures.append(f"no match for /{pattern}/")
    for text in expect.get("excludes", []):
        if text.lower() in lowered:
            failures.append(f"contains excluded {text!r}")
    return failures


def has_expectations(case: dict) -> bool:
    return any(case.get("expect", {}).get(key) for key in ("contains", "regex", "excludes"))


def gate_dataset_names(agent) -> list[str]:
    return [f"memory-gate-{agent.name}", "memory-gate"]


# Which gate datasets exist is asked on every activation in shadow mode; like the run-time
# settings (knowledge.settings_store), the answer is kept for a few seconds per process and
# dropped at once when this process changes a dataset.
_tested: dict = {"at": -CACHE_SECONDS, "names": frozenset()}


def gate_cache_clear() -> None:
    _tested["at"] = -CACHE_SECONDS


def gate_tested(agent) -> bool:
    """Whether the agent has a gate dataset."""
    now = time.monotonic()
    if now - _tested["at"] >= CACHE_SECONDS:
        _tested["names"] = frozenset(
            EvalDataset.objects.filter(name__startswith="memory-gate").values_list("name", flat=True)
        )
        _tested["at"] = now
    return not _tested["names"].isdisjoint(gate_dataset_names(agent))


def gate_dataset_for(agent) -> EvalDataset | None:
    """`memory-gate-<agent>` if it exists, else `memory-gate`, else None (untested)."""
    datasets = {d.name: d for d in EvalDataset.objects.filter(name__in=gate_dataset_names(agent))}
    return datasets.get(f"memory-gate-{agent.name}") or datasets.get("memory-gate")


# --- the two calls per case -------------------------------------------------------------------


def gate_context(*, agent, q: str, candidate, with_candidate: bool) -> dict:
    """The context the agent gets for a gate case's turn in the candidate's store: the candidate
    left out of recall (even when it is already active), or placed first in recalled memory
    exactly as recall places a memory."""
    return context_compile(
        store_scope(agent, candidate.store),
        q=q,
        budget_tokens=GATE_BUDGET_TOKENS,
        exclude_memory_ids=[candidate.pk],
        include_memories=[candidate] if with_candidate else [],
    )


def gate_prompt(*, agent, memory: Memory, case: dict, with_memory: bool) -> list[dict]:
    """The chat messages for one case: the context compiled for the case's turn (the candidate
    left out of recall, or forced in exactly as recall places it), the earlier turns, the turn."""
    system = context_text(
        gate_context(agent=agent, q=case["input"]["turn"], candidate=memory, with_candidate=with_memory)
    )
    return [
        {"role": "system", "content": system},
        *case["input"]["history"],
        {"role": "user", "content": case["input"]["turn"]},
    ]


def _ask(agent, messages: list[dict]) -> str:
    """One governed call of the agent's own model profile; any failure means the check could
    not run."""
    try:
        return model_call(
            purpose="gate", messages=messages, agent=agent, actor=Principal.system("eval-gate")
        ).text
    except ModelError as exc:
        raise GateUnavailable(exc.reason)


# --- a check --------------------------------------------------------------------------------


def _run(memory: Memory) -> dict:
    """Ask every gated case twice; returns the fields of a finished GateCheck."""
    dataset = gate_dataset_for(memory.owner)
    if dataset is None:
        return {"verdict": GateCheck.UNTESTED, "reason": "no gate dataset for this agent"}
    cases = [c for c in dataset.cases if has_expectations(c)][:MAX_CASES]
    if not cases:
        return {"verdict": GateCheck.UNTESTED, "dataset": dataset.name, "reason": "no case has expectations"}
    results, calls = [], 0
    try:
        for case in cases:
            answers = {}
            for with_memory in (False, True):
                calls += 1
                answers[with_memory] = _ask(
                    memory.owner,
                    gate_prompt(agent=memory.owner, memory=memory, case=case, with_memory=with_memory),
                )
            fail_without = score_answer(answers[False], case["expect"])
            fail_with = score_answer(answers[True], case["expect"])
            results.append(
                {
                    "case": case["id"],
                    "turn": case["input"]["turn"],
                    "answer_without": answers[False],
                    "answer_with": answers[True],
                    "pass_without": not fail_without,
                    "pass_with": not fail_with,
                    "failures_with": fail_with,
                    "regressed": not fail_without and bool(fail_with),
                }
            )
    except GateUnavailable as exc:
        return {
            "verdict": GateCheck.ERROR,
            "dataset": dataset.name,
            "reason": str(exc),
            "results": results,
            "calls": calls,
        }
    regressed = [r["case"] for r in results if r["regressed"]]
    return {
        "verdict": GateCheck.REGRESSED if regressed else GateCheck.PASS,
        "dataset": dataset.name,
        "regressed_cases": regressed,
        "results": results,
        "calls": calls,
        "reason": f"regressed cases: {', '.join(regressed)}" if regressed else "",
    }


def _record(check: GateCheck, outcome: dict, *, actor) -> GateCheck:
    """Store a finished verdict and audit it (memory id and case ids only, never text)."""
    for field, value in outcome.items():
        setattr(check, field, value)
    check.finished_at = timezone.now()
    check.save()
    memory = check.memory
    audit_record(
        f"memory.gate.{check.verdict}",
        actor=actor,
        store=memory.store,
        owner=memory.owner.name,
        object_type="memory",
        object_ids=[memory.pk],
        reason=check.reason if check.verdict == GateCheck.ERROR else "",
        counts={"cases": len(check.results), "calls": check.calls},
        data={
            "check": check.pk,
            "dataset": check.dataset,
            "regressed_cases": check.regressed_cases,
            "trigger": check.trigger,
        },
    )
    return check


def gate_check_run(*, actor, memory: Memory, trigger: str = "manual") -> GateCheck:
    """Run the gate on one memory now and record the verdict. Changes nothing else. The model
    calls happen outside any transaction; the verdict and its audit event are one."""
    outcome = _run(memory)
    with transaction.atomic():
        check = GateCheck(memory=memory, memory_version=memory.version, trigger=trigger)
        return _record(check, outcome, actor=actor)


def gate_enqueue(*, memory: Memory) -> GateCheck | None:
    """Shadow mode: queue a background check for a memory that just went into force (once per
    version)."""
    check, created = GateCheck.objects.get_or_create(
        memory=memory, memory_version=memory.version, trigger=SHADOW, defaults={"verdict": GateCheck.PENDING}
    )
    return check if created else None


def gate_run_pending(*, actor, limit: int = 50) -> int:
    """The shadow-mode job: run queued checks, each claimed by a conditional update so two
    workers never run one twice."""
    done = 0
    for check_id in GateCheck.objects.filter(verdict=GateCheck.PENDING).values_list("pk", flat=True)[:limit]:
        if not GateCheck.objects.filter(pk=check_id, verdict=GateCheck.PENDING).update(verdict="running"):
            continue
        check = GateCheck.objects.select_related("memory__owner").get(pk=check_id)
        outcome = _run(check.memory)
        with transaction.atomic():
            _record(check, outcome, actor=actor)
        done += 1
    return done


def gate_before_activation(*, memory: Memory) -> tuple[bool, str, str]:
    """Called by the one activation function before a memory goes into force; returns
    (allow, reason, verdict). enforce: runs the check now — regressed or error holds the memory
    in the review queue with the failing cases as the reason; untested and pass go ahead (every
    verdict is audited). shadow: goes ahead; a background check is queued after commit (when the
    agent has a gate dataset). off:
    goes ahead unchecked."""
    mode = setting_get("BRAIN_MEMORY_ACTIVATION_GATE")
    if mode == ENFORCE:
        check = gate_check_run(actor=Principal.system("eval-gate"), memory=memory, trigger=ENFORCE)
        if check.verdict == GateCheck.REGRESSED:
            return False, f"gate: {check.reason}", check.verdict
        if check.verdict == GateCheck.ERROR:
            return False, f"gate: the check could not run ({check.reason})", check.verdict
        return True, "", check.verdict
    if mode == SHADOW and gate_tested(memory.owner):
        # Agents without a gate dataset are untested: nothing to queue, nothing to spend.
        transaction.on_commit(lambda: gate_enqueue(memory=memory))
    return True, "", ""
