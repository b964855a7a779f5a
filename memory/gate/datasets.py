"""Eval datasets: validation, writes (audited) and JSONL import/export."""

import json
import re

from django.db import transaction

from knowledge.audit.services import audit_record, snapshot
from knowledge.errors import Invalid, NotFound
from memory.gate.services import gate_cache_clear
from memory.models import EvalDataset

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
EXPECT_KEYS = ("contains", "regex", "excludes")
MAX_CASES = 500
MAX_TEXT = 20_000


def dataset_named(name: str) -> EvalDataset:
    """The eval dataset a URL names; NotFound (404) when there is none. (Datasets are memory's
    rows, so their name is resolved here rather than in knowledge/names.py.)"""
    dataset = EvalDataset.objects.filter(name=name).first()
    if dataset is None:
        raise NotFound("No EvalDataset matches the given query.")
    return dataset


def normalise_case(raw, index: int) -> dict:
    """One case in canonical form, or Invalid naming the case and the problem. `input`
    may be the user's turn as a string or {"turn", "history": [{"role", "content"}]}."""
    where = f"case {index + 1}"
    if not isinstance(raw, dict):
        raise Invalid({"cases": [f"{where}: must be an object."]})
    case_id = str(raw.get("id") or "").strip()
    if not case_id or len(case_id) > 100:
        raise Invalid({"cases": [f"{where}: needs an id of 1 to 100 characters."]})
    where = f"case {case_id}"
    raw_input = raw.get("input")
    if isinstance(raw_input, str):
        raw_input = {"turn": raw_input, "history": []}
    if (
        not isinstance(raw_input, dict)
        or not isinstance(raw_input.get("turn"), str)
        or not raw_input["turn"].strip()
    ):
        raise Invalid(
            {"cases": [f'{where}: input must be the user\'s turn (a string) or {{"turn", "history"}}.']}
        )
    history = raw_input.get("history") or []
    if not isinstance(history, list) or not all(
        isinstance(t, dict) and t.get("role") in ("user", "assistant") and isinstance(t.get("content"), str)
        for t in history
    ):
        raise Invalid({"cases": [f'{where}: history is a list of {{"role": user|assistant, "content"}}.']})
    expect = raw.get("expect") or {}
    if not isinstance(expect, dict) or set(expect) - set(EXPECT_KEYS):
        raise Invalid({"cases": [f"{where}: expect may hold only contains, regex and excludes."]})
    clean_expect = {}
    for key in EXPECT_KEYS:
        values = expect.get(key) or []
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            raise Invalid({"cases": [f"{where}: expect.{key} must be a list of non-empty strings."]})
        if key == "regex":
            for pattern in values:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise Invalid({"cases": [f"{where}: bad regex {pattern!r}: {exc}."]})
        clean_expect[key] = values
    size = len(json.dumps(raw_input)) + len(json.dumps(clean_expect))
    if size > MAX_TEXT:
        raise Invalid({"cases": [f"{where}: larger than {MAX_TEXT} characters."]})
    return {"id": case_id, "input": {"turn": raw_input["turn"], "history": history}, "expect": clean_expect}


def validate_dataset(*, name: str, kind: str, cases) -> list[dict]:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise Invalid({"name": ["Use 1-100 lower-case letters, digits, dots, dashes or underscores."]})
    if kind != EvalDataset.KIND_AGENT_TURN:
        raise Invalid({"kind": ["Only agent_turn datasets are supported."]})
    if not isinstance(cases, list):
        raise Invalid({"cases": ["Must be a list."]})
    if len(cases) > MAX_CASES:
        raise Invalid({"cases": [f"At most {MAX_CASES} cases."]})
    clean = [normalise_case(raw, i) for i, raw in enumerate(cases)]
    ids = [c["id"] for c in clean]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise Invalid({"cases": [f"Duplicate case ids: {', '.join(duplicates)}."]})
    return clean


def dataset_create(*, actor, name: str, kind: str, cases) -> EvalDataset:
    clean = validate_dataset(name=name, kind=kind, cases=cases)
    with transaction.atomic():
        if EvalDataset.objects.filter(name=name).exists():
            raise Invalid({"name": [f"A dataset named {name} already exists."]})
        dataset = EvalDataset.objects.create(name=name, kind=kind, cases=clean)
        transaction.on_commit(gate_cache_clear)
        audit_record(
            "eval_dataset.created",
            actor=actor,
            object_type="eval_dataset",
            object_ids=[dataset.pk],
            counts={"cases": len(clean)},
            data={"name": name},
            revisions=[("eval_dataset", dataset.pk, None, snapshot(dataset))],
        )
    return dataset


def dataset_replace(
    *, actor, dataset: EvalDataset, kind: str, cases, expected_version: int | None = None
) -> EvalDataset:
    """Replace a dataset's cases. With `expected_version`, a concurrent edit is refused."""
    clean = validate_dataset(name=dataset.name, kind=kind, cases=cases)
    with transaction.atomic():
        dataset = EvalDataset.objects.select_for_update().get(pk=dataset.pk)
        if expected_version is not None and dataset.version != expected_version:
            raise Invalid({"version": ["Someone else changed this dataset; reload and try again."]})
        before = snapshot(dataset)
        dataset.kind, dataset.cases, dataset.version = kind, clean, dataset.version + 1
        dataset.save(update_fields=["kind", "cases", "version", "updated_at"])
        audit_record(
            "eval_dataset.updated",
            actor=actor,
            object_type="eval_dataset",
            object_ids=[dataset.pk],
            counts={"cases": len(clean)},
            data={"name": dataset.name},
            revisions=[("eval_dataset", dataset.pk, before, snapshot(dataset))],
        )
    return dataset


def dataset_delete(*, actor, dataset: EvalDataset) -> None:
    with transaction.atomic():
        before = snapshot(dataset)
        audit_record(
            "eval_dataset.deleted",
            actor=actor,
            object_type="eval_dataset",
            object_ids=[dataset.pk],
            data={"name": dataset.name},
            revisions=[("eval_dataset", dataset.pk, before, None)],
        )
        dataset.delete()
        transaction.on_commit(gate_cache_clear)


def cases_from_jsonl(text: str) -> list:
    """Parse JSONL (one case per line, blank lines ignored) or raise Invalid with the line."""
    cases = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise Invalid({"cases": [f"line {number}: not JSON ({exc.msg})."]})
    return cases


def cases_to_jsonl(cases: list[dict]) -> str:
    return "".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases)
