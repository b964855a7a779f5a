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


def make_entry(owner, *, name=None, store="shared", actor=None, blocks=(), **fields):
    """An entry owned by `owner` (written by a person admin unless `actor` is given), with body
    blocks given as texts or {"text", "sources"} dicts."""
    from knowledge.entries import entry_create

    actor = actor or Principal(kind="person", name="tests", role="admin")
    return entry_create(
        actor=actor,
        owner=owner,
        store=store,
        name=name or f"entry {next(_seq)}",
        blocks=[b if isinstance(b, dict) else {"text": b} for b in blocks],
        **fields,
    )
