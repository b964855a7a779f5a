"""Generated agent files and Mem0 exports: whatever a file holds, an import answers with a domain
error (Invalid, BadFile; CommandError from the commands) or imports it, never with another
exception (a 500 in the console), and a refused file writes nothing at all. Few, derandomized
examples: a fixed, fast sweep over the shapes a hostile or broken file takes."""

import io
import json
import math

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge.errors import DomainError
from knowledge.models import (
    Agent,
    AgentSkill,
    AuditEvent,
    CurationGuide,
    Entry,
    EntryRelation,
    Memory,
    MemorySource,
    MemoryVersion,
    Person,
    PinnedMemo,
    Skill,
)
from knowledge.portability.services import agent_import
from knowledge.principal import Principal
from memory.imports.mem0 import BadFile, mem0_import, mem0_parse

FUZZ = settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TABLES = (Agent, AgentSkill, AuditEvent, CurationGuide, Entry, EntryRelation, Memory, MemorySource,
          MemoryVersion, Person, PinnedMemo, Skill)  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["", "self", "shared", "private:alice", "channel:nope", "agent:copilot", "../../x",
                      "2024-02-30T10:00:00+00:00", "2026-06-01T08:00:00", "a\x00b", "e1", "m1", "alice"])
    | st.sampled_from([math.nan, math.inf, "[" * 3000])
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
DELETE = object()
RAW_JUNK = ["[" * 5000 + "]" * 5000, '{"type": "memo", "text": NaN}', '{"type": ["memo"]}', "\x00"]

TEXT = "Bob owns billing."
AGENT_FILE = [
    {"type": "brain-agent-export", "version": 1, "agent": "fuzzed"},
    {"type": "agent", "name": "fuzzed", "trusted": False, "instructions": ""},
    {"type": "guide", "taxonomy": "person", "update_rules": "Date facts."},
    {"type": "memo", "text": "Be brief."},
    {"type": "skill", "name": "triage", "title": "Triage", "instructions": "", "enabled": True},
    {"type": "entry", "ref": "e1", "name": "VPN", "entry_type": "system", "store": "shared", "aliases": []},
    {"type": "memory", "ref": "m1", "version": 1, "store": "shared", "text": TEXT, "status": "active",
     "tier": "semantic", "key": "billing.owner", "value": "bob", "entry": None, "skill": None,
     "versions": [{"version": 1, "text": TEXT, "key": "billing.owner", "value": "bob"}],
     "sources": [{"kind": "ticket", "ref": "INC-1", "fingerprint": "", "state": "unchanged"}]},
    {"type": "memory", "ref": "m2", "version": 1, "store": "self", "text": "Ask for the id.", "status": "active",
     "tier": "procedural", "skill": "triage", "versions": [{"version": 1, "text": "Ask for the id."}]},
    {"type": "memory", "ref": "m3", "version": 1, "store": "shared", "text": "Client 5.2.1.", "status": "active",
     "tier": "semantic", "entry": "e1", "position": 0, "versions": [{"version": 1, "text": "Client 5.2.1."}]},
    {"type": "relation", "source": "e1", "target": "e1", "predicate": "relates", "sources": [{"kind": "kb"}],
     "valid_from": "2026-01-01", "valid_to": None},
]  # fmt: skip


def _mutation():
    line = st.integers(min_value=0, max_value=len(AGENT_FILE) - 1)
    field = st.sampled_from(
        sorted({k for row in AGENT_FILE for k in row} | {"versions.0.text", "sources.0.ref", "new"})
    )
    return st.tuples(line, field, values | st.just(DELETE))


def _mutated(mutations, junk) -> str:
    rows = json.loads(json.dumps(AGENT_FILE))
    for line, field, value in mutations:
        row = rows[line]
        *path, last = field.split(".")
        for step in path:
            if isinstance(row, dict):
                row = row.get(step)
            elif isinstance(row, list) and step.isdigit() and int(step) < len(row):
                row = row[int(step)]
        if not isinstance(row, dict):
            continue
        if value is DELETE:
            row.pop(last, None)
        else:
            row[last] = value
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    for at, text in junk:
        lines.insert(at % (len(lines) + 1), text)
    return "\n".join(lines)


def _counts():
    return [m.objects.count() for m in TABLES]


def _runs(call, allowed) -> None:
    """`call` inside a transaction rolled back afterwards (each example starts from the same
    world): a refusal must be one of `allowed` and leave every table as it was."""
    with transaction.atomic():
        before = _counts()
        try:
            call()
        except allowed:
            assert _counts() == before, "a refused import wrote something"
        transaction.set_rollback(True)


@pytest.mark.django_db
@FUZZ
@given(
    mutations=st.lists(_mutation(), max_size=3),
    junk=st.lists(
        st.tuples(
            st.integers(0, 20), st.text(max_size=30) | values.map(json.dumps) | st.sampled_from(RAW_JUNK)
        ),
        max_size=2,
    ),
    as_name=st.sampled_from(["", "copilot", "copy-1"]),
    shared=st.booleans(),
)
def test_a_generated_agent_file_is_imported_or_refused_whole(
    world, tmp_path, mutations, junk, as_name, shared
):
    text = _mutated(mutations, junk)
    admin = Principal.for_user(world.admin)
    _runs(
        lambda: agent_import(actor=admin, lines=io.StringIO(text), as_name=as_name, with_shared=shared),
        DomainError,
    )
    path = tmp_path / "agent.jsonl"
    path.write_text(text, encoding="utf-8")
    _runs(lambda: call_command("import_agent", str(path), "--dry-run", stdout=io.StringIO()), CommandError)


mem0_items = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(max_size=8) | st.integers() | values, "memory": st.text(max_size=30) | values},
        optional={
            "user_id": st.sampled_from(["alice", "Fahim Khan", "", "bob"]) | values,
            "agent_id": st.sampled_from(["copilot", "scribe", "nobody"]) | values,
            "metadata": values | st.just({"score": math.nan}),
            "categories": values,
            "created_at": st.sampled_from(["2026-06-01T08:00:00-07:00", "2024-02-30T00:00:00", "yesterday"])
            | values,
        },
    ),
    max_size=4,
)


def _mem0_file(items, shape) -> str:
    if shape == "deep":  # nesting past what Python's json parser itself can follow
        return "[" * 5000 + "]" * 5000
    if shape == "lines":
        return "\n".join(json.dumps(i) for i in items)
    return json.dumps({"results": items} if shape == "results" else items)


@pytest.mark.django_db
@FUZZ
@given(
    items=mem0_items,
    shape=st.sampled_from(["list", "results", "lines", "deep"]),
    junk=st.text(max_size=20) | st.sampled_from(["\n" + "[" * 5000, '\n{"id": 9, "memory": NaN}']),
)
def test_a_generated_mem0_export_is_imported_or_refused_whole(world, tmp_path, items, shape, junk):
    raw = _mem0_file(items, shape) + (junk if junk.strip() and shape == "lines" else "")

    def parse_and_import():
        mem0_import(agent=world.scribe, memories=mem0_parse(raw))

    _runs(parse_and_import, (BadFile, DomainError))
    path = tmp_path / "mem0.json"
    path.write_text(raw, encoding="utf-8")
    _runs(lambda: call_command("import_mem0", str(path), agent="copilot", stdout=io.StringIO(),
                               stderr=io.StringIO()), CommandError)  # fmt: skip
