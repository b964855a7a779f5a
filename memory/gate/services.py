"""The eval gate: ask an agent's gate cases twice — without the candidate memory and with it
placed in the prompt exactly as recall places it — and score both answers. A case that passes
without and fails with is a regression.

Every check runs in the background: it is queued (a pending GateCheck and a `gate.check` model
job, registered by memory.jobs) and run by the job, never inside a request or a transaction.
The 15-minute sweep runs whatever is still pending (a shadow check, a deferred one, one whose
job was lost) and takes back a claim a dead worker left running.

Modes (BRAIN_MEMORY_ACTIVATION_GATE, run-time changeable): shadow (activation unchanged; a check
is queued after commit), enforce (a memory going into force is stored queued with reason
`gate`, and memory.lifecycle.gated activates it when its check passes), off.

A cut or empty answer is asked once more; a second one, a model that is not configured or over
its budget, make the check `unchecked` ("not checked"), never a regression. An outage (no
answer, a timeout, a 5xx, an endpoint the background check finds down) defers the check to the
next sweep with the same input; after MAX_DEFERRALS it is unchecked too. What an unchecked
check means for a held memory is BRAIN_GATE_UNCHECKED: `hold` (the default: it waits in the
review queue saying it was not checked, and a reviewer's approval then activates it without a
new check) or `activate` (it goes into force unchecked). A memory held after an outage is not
left to a reviewer for good: once its agent's endpoint answers again, the sweep runs its check
again (`outage_checks_back`), unless a reviewer decided first."""

import datetime
import re
import time

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from knowledge.audit.services import audit_record
from knowledge.llm import ModelError, ModelReplyCut, deferred_reason, model_call, outage
from knowledge.llm.jobs import actor_args, job_enqueue
from knowledge.models import Memory, ModelJob
from knowledge.principal import Principal
from knowledge.settings_store import CACHE_SECONDS, setting_get
from memory.models import EvalDataset, GateCheck
from memory.recall.context import context_compile, context_text
from memory.recall.scope import store_scope

MAX_CASES = 20
GATE_BUDGET_TOKENS = 2000
SHADOW, ENFORCE, OFF, MANUAL = "shadow", "enforce", "off", "manual"
UNCHECKED_HOLD, UNCHECKED_ACTIVATE = "hold", "activate"  # BRAIN_GATE_UNCHECKED
GATE_JOB = "gate.check"
# The sweep runs every 15 minutes: eight deferrals are about two hours without an answer.
MAX_DEFERRALS = 8
# A running claim older than this was left by a worker that died (a django-q2 task ends at 600 s).
STALE_CLAIM = datetime.timedelta(minutes=30)
SYSTEM_ACTOR = "eval-gate"


class GateUnchecked(Exception):
    """No usable answer: the check is `unchecked` (not configured, over budget, cut or empty twice)."""


class GateDeferred(Exception):
    """The model server does not answer now: the check waits for the next sweep."""


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
    """One answer of the agent's own model profile. A cut or empty answer is asked once more
    (the second call is refused like any other when the budget is spent); two make the check
    unchecked, never scored. An outage defers the check."""
    problem = ""
    for _ in range(2):
        try:
            text = model_call(
                purpose="gate", messages=messages, agent=agent, actor=Principal.system(SYSTEM_ACTOR)
            ).text
        except ModelReplyCut as exc:
            problem = exc.reason
            continue
        except ModelError as exc:
            if outage(exc):
                raise GateDeferred(exc.reason) from None
            raise GateUnchecked(exc.reason) from None
        if text.strip():
            return text
        problem = "the answer was empty"
    raise GateUnchecked(f"no usable answer in two tries: {problem}")


# --- a check --------------------------------------------------------------------------------


def _untested(memory: Memory) -> dict | None:
    """The finished fields of a check that needs no model (no dataset, no case with
    expectations), else None."""
    dataset = gate_dataset_for(memory.owner)
    if dataset is None:
        return {"verdict": GateCheck.UNTESTED, "reason": "no gate dataset for this agent"}
    if not any(has_expectations(c) for c in dataset.cases):
        return {"verdict": GateCheck.UNTESTED, "dataset": dataset.name, "reason": "no case has expectations"}
    return None


def _run(memory: Memory) -> dict:
    """Ask every gated case twice; returns the fields of a finished GateCheck. Raises
    GateDeferred when the model server does not answer (nothing is recorded)."""
    untested = _untested(memory)
    if untested:
        return untested
    dataset = gate_dataset_for(memory.owner)
    cases = [c for c in dataset.cases if has_expectations(c)][:MAX_CASES]
    down = outage(agent=memory.owner)
    if down:
        raise GateDeferred(down)
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
    except GateUnchecked as exc:
        return {
            "verdict": GateCheck.UNCHECKED,
            "dataset": dataset.name,
            "reason": f"not checked: {exc}",
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
        reason=check.reason if check.verdict in (GateCheck.UNCHECKED, GateCheck.ERROR) else "",
        counts={"cases": len(check.results), "calls": check.calls},
        data={
            "check": check.pk,
            "dataset": check.dataset,
            "regressed_cases": check.regressed_cases,
            "trigger": check.trigger,
            "deferrals": check.deferrals,
        },
    )
    return check


def gate_check_queue(
    *, actor, memory: Memory, trigger: str = MANUAL, activation=None
) -> tuple[GateCheck, ModelJob]:
    """Queue a check of `memory` as it is now: a pending GateCheck and the model job that runs it
    once the caller's transaction commits (poll the job: `GET /api/model-jobs/{id}`)."""
    check = GateCheck.objects.create(
        memory=memory, memory_version=memory.version, trigger=trigger, activation=activation or {}
    )
    job = job_enqueue(kind=GATE_JOB, args={"check": check.pk}, actor=actor)
    return check, job


def gate_check_claim(check_id: int) -> GateCheck | None:
    """Claim a pending check for one run (a conditional update: two workers never run one
    twice); None when it is not pending."""
    if not GateCheck.objects.filter(pk=check_id, verdict=GateCheck.PENDING).update(
        verdict=GateCheck.RUNNING, started_at=timezone.now()
    ):
        return None
    return GateCheck.objects.select_related("memory__owner").get(pk=check_id)


def gate_check_perform(check: GateCheck, *, actor) -> GateCheck:
    """Run a claimed check and record its verdict (one transaction with its audit event). The
    model calls happen outside any transaction. An outage puts it back to pending for the next
    sweep (`deferrals` counts them, the reason says why); the last allowed one is unchecked."""
    try:
        outcome = _run(check.memory)
    except GateDeferred as exc:
        deferrals = check.deferrals + 1
        if deferrals < MAX_DEFERRALS:
            GateCheck.objects.filter(pk=check.pk).update(
                verdict=GateCheck.PENDING,
                deferrals=deferrals,
                started_at=None,
                reason=deferred_reason(str(exc)),
            )
            check.refresh_from_db()
            return check
        outcome = {
            "verdict": GateCheck.UNCHECKED,
            "deferrals": deferrals,
            "reason": f"not checked: the model server did not answer in {deferrals} tries ({exc})",
        }
    with transaction.atomic():
        return _record(check, outcome, actor=actor)


def gate_checks_due() -> list[int]:
    """The sweep's work: a claim older than STALE_CLAIM goes back to pending (its worker died),
    and so do the checks an outage left unchecked whose server answers again
    (outage_checks_back); then every pending check, oldest first."""
    GateCheck.objects.filter(verdict=GateCheck.RUNNING, started_at__lt=timezone.now() - STALE_CLAIM).update(
        verdict=GateCheck.PENDING, started_at=None
    )
    outage_checks_back()
    return list(
        GateCheck.objects.filter(verdict=GateCheck.PENDING).order_by("id").values_list("pk", flat=True)
    )


def outage_checks_back() -> list[int]:
    """The enforcing checks an outage ended unchecked (after MAX_DEFERRALS) whose memory the gate
    still holds at that version — no reviewer has decided — go back to pending with their tries
    counted anew, once the background check no longer finds their agent's endpoint down. Returns
    their ids."""
    held = GateCheck.objects.filter(
        trigger=ENFORCE,
        verdict=GateCheck.UNCHECKED,
        deferrals__gte=MAX_DEFERRALS,
        memory__status=Memory.QUEUED,
        memory__queue_reason="gate",
        memory__version=F("memory_version"),
    ).select_related("memory__owner")
    back = [check.pk for check in held if not outage(agent=check.memory.owner)]
    GateCheck.objects.filter(pk__in=back, verdict=GateCheck.UNCHECKED).update(
        verdict=GateCheck.PENDING,
        deferrals=0,
        started_at=None,
        finished_at=None,
        reason="checked again: the model server answers after an outage",
    )
    return back


def gate_enqueue(*, memory: Memory) -> GateCheck | None:
    """Shadow mode: queue a background check for a memory that just went into force (once per
    version); the sweep runs it."""
    check, created = GateCheck.objects.get_or_create(
        memory=memory, memory_version=memory.version, trigger=SHADOW, defaults={"verdict": GateCheck.PENDING}
    )
    return check if created else None


def gate_last(memory: Memory) -> GateCheck | None:
    """The latest finished check of the memory's current version."""
    return (
        GateCheck.objects.filter(memory=memory, memory_version=memory.version, verdict__in=GateCheck.FINISHED)
        .order_by("-finished_at", "-id")
        .first()
    )


def unchecked_goes_ahead(*, reviewed: bool) -> bool:
    """Whether a memory whose check could not be made goes into force: with BRAIN_GATE_UNCHECKED
    `activate`, or when a reviewer approves it (`hold` put it before one)."""
    return reviewed or setting_get("BRAIN_GATE_UNCHECKED") == UNCHECKED_ACTIVATE


def gate_before_activation(
    *, memory: Memory, actor, route: str, reviewed: bool, decision=None, boundary=None
):
    """Called by the one activation function once the memory is stored, before it goes into
    force; returns (allow, reason, verdict). No model call is made here.

    enforce: a version that already passed (or is untested) goes ahead, so does an unchecked one
    by `unchecked_goes_ahead`; an agent without gate cases goes ahead (its untested verdict recorded and audited);
    otherwise the memory is held (queue reason gate) and a check is queued with what asked for
    the activation (`actor`, `route`, a conflict `decision` and its `boundary`), for
    memory.lifecycle.gated to activate it when it passes. A check already waiting for this
    version is not queued twice (a pending one takes the newest request).
    shadow: goes ahead; a background check is queued after commit (when the agent has a gate
    dataset). off: goes ahead unchecked."""
    mode = setting_get("BRAIN_MEMORY_ACTIVATION_GATE")
    if mode == OFF:
        return True, "", ""
    if mode == SHADOW:
        if gate_tested(memory.owner):
            # Agents without a gate dataset are untested: nothing to queue, nothing to spend.
            transaction.on_commit(lambda: gate_enqueue(memory=memory))
        return True, "", ""
    last = gate_last(memory)
    if last is not None and (
        last.verdict in (GateCheck.PASS, GateCheck.UNTESTED)
        or (
            last.verdict in (GateCheck.UNCHECKED, GateCheck.ERROR) and unchecked_goes_ahead(reviewed=reviewed)
        )
    ):
        return True, "", last.verdict
    untested = _untested(memory)
    if untested:
        check = GateCheck(memory=memory, memory_version=memory.version, trigger=ENFORCE)
        _record(check, untested, actor=Principal.system(SYSTEM_ACTOR))
        return True, "", GateCheck.UNTESTED
    asked = {
        "actor": actor_args(actor),
        "route": route,
        "decision": decision,
        "boundary": boundary.isoformat() if boundary else None,
    }
    waiting = GateCheck.objects.filter(
        memory=memory,
        memory_version=memory.version,
        trigger=ENFORCE,
        verdict__in=[GateCheck.PENDING, GateCheck.RUNNING],
    ).first()
    if waiting is None:
        waiting, _ = gate_check_queue(actor=actor, memory=memory, trigger=ENFORCE, activation=asked)
    else:
        GateCheck.objects.filter(pk=waiting.pk, verdict=GateCheck.PENDING).update(activation=asked)
    return (
        False,
        f"gate: waiting for the eval gate's check (check {waiting.pk}, in the background)",
        GateCheck.PENDING,
    )
