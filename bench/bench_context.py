"""Context compilation with skills: POST /api/agents/{agent}/context for an agent with 5 enabled
skills of 50 lessons each, against the same call for an agent without skills, in one run.

Both agents read the same recalled memory (2,000 shared memories, embedded by the backlog job)
through a conversation in the same channel and answer the same questions, alternately, so
the only difference is the skills section (two queries and the rendering of 250 lessons)."""

import random
import statistics
import time

from django.test import override_settings
from rest_framework.test import APIClient

from bench.recall_seed import ACTOR, agent, analyze, bulk_memories, reset_recall_tables
from bench.textgen import TextGen, question
from knowledge.conversations import services as messages
from knowledge.embeddings.backlog import run_backlog
from knowledge.models import Memory, Skill
from knowledge.principal import Principal
from knowledge.principals import services
from memory.recall import resolve_scope
from memory.recall.context import context_compile
from memory.skills import services as skills

MEMORIES = 2_000
SKILLS = 5
LESSONS = 50
QUERIES = 300
WARMUP = 10
BUDGET = 8_000  # room for every skill and a full recall section, so both agents recall the same


def _client(agent_obj) -> APIClient:
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {services.token_create(actor=ACTOR, agent=agent_obj)}")
    return client


def _world(gen: TextGen):
    owner = agent("context-owner")
    plain, skilled = agent("context-plain"), agent("context-skilled")
    channel = messages.channel_open(actor=ACTOR, name="context-bench")
    conversations = {
        a.name: messages.conversation_start(actor=ACTOR, agent=a, channel=channel) for a in (plain, skilled)
    }
    bulk_memories([{"owner": owner, "store": "shared", "text": gen.message()} for _ in range(MEMORIES)])
    admin = Principal(kind="person", name="bench", role="admin")
    Skill.objects.filter(name__startswith="bench-skill-").delete()
    lessons = []
    for s in range(SKILLS):
        skill = skills.skill_create(
            actor=admin,
            name=f"bench-skill-{s}",
            title=f"Bench skill {s}",
            instructions=" ".join(gen.message() for _ in range(4)),
        )
        skills.skill_enable(actor=admin, agent=skilled, skill=skill, enabled=True)
        lessons += [
            {
                "owner": skilled,
                "store": "self",
                "text": f"Lesson {i}: {gen.message()[:90]}",
                "tier": Memory.PROCEDURAL,
                "category": "lesson",
                "skill": skill,
                "position": i,
            }
            for i in range(LESSONS)
        ]
    bulk_memories(lessons)
    return plain, skilled, conversations


def _p95(values):
    values = sorted(values)
    return values[int(len(values) * 0.95) - 1]


def run(report):
    gen = TextGen(2027)
    rng = random.Random(2027)
    reset_recall_tables()
    plain, skilled, conversations = _world(gen)
    with override_settings(BRAIN_EMBEDDING_KICK=False, BRAIN_OVERLAY_BUDGET_TOKENS=2_000):
        run_backlog(max_seconds=600)
        analyze()
        clients = {a.name: _client(a) for a in (plain, skilled)}
        questions = [question(gen) for _ in range(QUERIES + WARMUP)]
        timings = {plain.name: [], skilled.name: []}
        lessons_seen = 0
        for i, q in enumerate(questions):
            order = [plain, skilled] if rng.random() < 0.5 else [skilled, plain]
            for a in order:
                body = {"conversation": conversations[a.name].pk, "q": q, "budget_tokens": BUDGET}
                t0 = time.perf_counter()
                response = clients[a.name].post(f"/api/agents/{a.name}/context", body, format="json")
                spent = (time.perf_counter() - t0) * 1000
                assert response.status_code == 200, response.content[:500]
                if i >= WARMUP:
                    timings[a.name].append(spent)
                if a is skilled and i == 0:
                    section = next(s for s in response.json()["sections"] if s["name"] == "skills")
                    lessons_seen = sum(len(s["lessons"]) for s in section["skills"])
        # The same compilations without the HTTP layer (auth, validation, JSON of a larger body).
        service = {plain.name: [], skilled.name: []}
        principal = {a.name: Principal.for_agent(a) for a in (plain, skilled)}
        for i, q in enumerate(questions):
            order = [plain, skilled] if rng.random() < 0.5 else [skilled, plain]
            for a in order:
                t0 = time.perf_counter()
                scope = resolve_scope(principal[a.name], agent=a, conversation=conversations[a.name])
                context_compile(scope, q=q, budget_tokens=BUDGET)
                if i >= WARMUP:
                    service[a.name].append((time.perf_counter() - t0) * 1000)
    without, with_ = _p95(timings[plain.name]), _p95(timings[skilled.name])
    assert lessons_seen == SKILLS * LESSONS, lessons_seen
    report(
        "context compilation p95 without skills (API)",
        without,
        "ms",
        note=f"{QUERIES} calls of POST /api/agents/{{agent}}/context, budget {BUDGET:,}, over {MEMORIES:,} "
        f"shared memories; p50 {statistics.median(timings[plain.name]):.0f} ms",
    )
    report(
        f"context compilation p95 with {SKILLS} skills × {LESSONS} lessons (API)",
        with_,
        "ms",
        target="≤ 1.10 × without",
        note=f"ratio {with_ / without:.3f}; p50 {statistics.median(timings[skilled.name]):.0f} ms; "
        "measured alternately with the call without skills, same questions",
    )
    s_without, s_with = _p95(service[plain.name]), _p95(service[skilled.name])
    report(
        "context compilation p95 with skills, % of without (service)",
        100 * s_with / s_without,
        "%",
        target="≤ 110 %",
        note=f"memory.recall.context.context_compile called directly: p95 {s_with:.0f} ms with, {s_without:.0f} ms "
        f"without; p50 {statistics.median(service[skilled.name]):.0f} / {statistics.median(service[plain.name]):.0f} ms",
    )
