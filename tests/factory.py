"""A plain factory for tests: make objects through the real services, return raw tokens."""

import itertools

from knowledge.conversations import services as conversations
from knowledge.models import Channel
from knowledge.principal import Principal
from knowledge.principals import services

SYSTEM = Principal.system("tests")
_seq = itertools.count(1)


def make_agent(name=None, *, trusted=False):
    return services.agent_create(actor=SYSTEM, name=name or f"agent{next(_seq)}", trusted=trusted)


def make_token(*, agent=None, user=None, integration=None) -> str:
    return services.token_create(actor=SYSTEM, agent=agent, user=user, integration=integration)


def make_user(username=None, *, role="reviewer", password="correct-horse-9"):
    return services.consoleuser_create(
        actor=SYSTEM, username=username or f"user{next(_seq)}", role=role, password=password
    )


def make_person(name=None):
    return services.person_get_or_create(actor=SYSTEM, name=name or f"person{next(_seq)}")


def make_channel(
    name=None, *, kind=Channel.KIND_SHARED, person=None, agent=None, memory_scope=Channel.SCOPE_SHARED
):
    return conversations.channel_create(
        actor=SYSTEM,
        name=name or f"channel{next(_seq)}",
        kind=kind,
        person=person,
        agent=agent,
        memory_scope=memory_scope,
    )


def make_conversation(agent, channel, thread=""):
    return conversations.conversation_start(actor=SYSTEM, agent=agent, channel=channel, thread=thread)


def make_memory(owner, text=None, *, store="self", actor=None, route="api_write", now=None, **fields):
    """A memory written through the real write service. By default the system actor writes it,
    so it is active at once; pass actor=Principal.for_agent(agent) for the agent's own route.
    `fields` are the write request's (memory.lifecycle.write.WriteRequest)."""
    from memory.lifecycle.write import WriteRequest, memory_write

    request = WriteRequest(owner=owner, store=store, text=text or f"memory {next(_seq)}", **fields)
    return memory_write(actor=actor or SYSTEM, request=request, route=route, now=now)


def make_queued_memory(owner, text=None, *, store="self", now=None, **fields):
    """A memory waiting for review: an untrusted agent's own write, or for a trusted agent a
    distiller proposal (auto-activation is off by default)."""
    from memory.lifecycle.write import WriteRequest, memory_write

    actor, route = (SYSTEM, "distiller") if owner.trusted else (Principal.for_agent(owner), "api_write")
    request = WriteRequest(owner=owner, store=store, text=text or f"queued memory {next(_seq)}", **fields)
    return memory_write(actor=actor, request=request, route=route, now=now)


def make_entry(owner, *, name=None, store="shared", actor=None, blocks=(), **fields):
    """An entry owned by `owner` (written by a person admin unless `actor` is given), with body
    blocks given as texts or {"text", "sources"} dicts."""
    from knowledge.entries.services import entry_create

    actor = actor or Principal(kind="person", name="tests", role="admin")
    return entry_create(
        actor=actor,
        owner=owner,
        store=store,
        name=name or f"entry {next(_seq)}",
        blocks=[b if isinstance(b, dict) else {"text": b} for b in blocks],
        **fields,
    )


# --- Conversations in, memory out -------------------------------------------------------------


def post_messages(channel, rows, *, actor=SYSTEM):
    """Store messages through the real ingestion service. `rows`: dicts with speaker, text and
    optional ts, thread, external_id. Returns the stored ids in order."""
    from knowledge.conversations import services as messages

    result = messages.message_ingest(
        actor=actor, messages=[messages.MessageIn(channel=channel, **row) for row in rows]
    )
    return result.ids


def make_memory_row(owner, text, *, store="shared", status="active", **fields):
    """A memory row written the way every writer writes one (knowledge.memories)."""
    from django.db import transaction

    from knowledge.memories.activation import memory_row_create

    with transaction.atomic():
        return memory_row_create(
            owner=owner,
            store=store,
            text=text,
            author_kind="system",
            author_name="tests",
            status=status,
            **fields,
        )


def set_state(pks, **fields) -> int:
    """Put memory rows into a state directly, as older data or a crashed process may have left
    them: through the one writer's door (knowledge.memories.guard), as the database allows no
    other."""
    from knowledge.memories.guard import memory_rows_guard
    from knowledge.models import Memory

    with memory_rows_guard():
        return Memory.objects.filter(pk__in=list(pks)).update(**fields)


def embed_all():
    """Drain the embedding backlog with the real local embedder (what the worker does)."""
    from knowledge.embeddings.backlog import run_backlog

    return run_backlog(max_seconds=120)


def run_queued_jobs():
    """What a worker does with the model jobs requests queued (tests never fire on_commit, so
    nothing runs by itself): run each once, oldest first. Returns the newest job."""
    from knowledge.llm.jobs import job_run
    from knowledge.models import ModelJob

    for pk in ModelJob.objects.filter(state=ModelJob.QUEUED).order_by("pk").values_list("pk", flat=True):
        job_run(pk)
    return ModelJob.objects.order_by("-pk").first()


def queued_run(client, path, data=None):
    """POST a run request (202 with its job), run the job as a worker would, and return the
    finished job as the API shows it."""
    response = client.post(path, data or {}, format="json")
    assert response.status_code == 202, response.content
    job = response.json()
    assert job["state"] == "queued"
    run_queued_jobs()
    return client.get(job["url"]).json()
