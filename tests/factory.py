"""A plain factory for tests: make objects through the real services, return raw tokens."""

import itertools

from knowledge import services
from knowledge.models import Channel
from knowledge.principals import Principal

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


def make_channel(name=None, *, kind=Channel.KIND_SHARED, person=None, memory_scope=Channel.SCOPE_SHARED):
    return services.channel_create(
        actor=SYSTEM, name=name or f"channel{next(_seq)}", kind=kind, person=person, memory_scope=memory_scope
    )


def make_conversation(agent, channel, thread=""):
    return services.conversation_start(actor=SYSTEM, agent=agent, channel=channel, thread=thread)


# --- Conversations in, memory out (issue 6) -----------------------------------------------------


def post_messages(channel, rows, *, actor=SYSTEM):
    """Store messages through the real ingestion service. `rows`: dicts with speaker, text and
    optional ts, thread, external_id. Returns the stored ids in order."""
    from knowledge import messages

    result = messages.message_ingest(
        actor=actor, messages=[messages.MessageIn(channel=channel, **row) for row in rows]
    )
    return result.ids


def make_memory(owner, text, *, store="shared", status="active", **fields):
    """A memory row written the way every writer writes one (knowledge.memories)."""
    from django.db import transaction

    from knowledge.memories import memory_row_create

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


def embed_all():
    """Drain the embedding backlog with the real local embedder (what the worker does)."""
    from knowledge.vectors import run_backlog

    return run_backlog(max_seconds=120)
