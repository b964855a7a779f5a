"""A scope's visibility filter is compiled once per distinct filter and reused exactly."""

import datetime

from django.db.models import Q

from knowledge.models import Memory, Message
from knowledge.principal import Principal
from memory.recall import memory_search, resolve_scope
from memory.recall import scope as S
from tests import factory


def test_the_same_filter_is_compiled_once_and_gives_the_same_sql(world):
    S._compiled.clear()
    q = Q(store="shared") | (Q(store="self") & Q(owner=world.copilot))
    first = S.compiled_where(Memory, q)
    assert first[1] == ["shared", "self", world.copilot.pk]
    calls = []
    original = Memory.objects.filter
    try:
        Memory.objects.filter = lambda *a, **k: calls.append(a) or original(*a, **k)
        again = S.compiled_where(Memory, Q(store="shared") | (Q(store="self") & Q(owner=world.copilot)))
    finally:
        del Memory.objects.filter
    assert again == first and calls == []
    again[1].append("changed by a caller")  # callers get their own parameter list
    assert S.compiled_where(Memory, q) == first


def test_different_agents_models_and_values_are_different_entries(world):
    S._compiled.clear()
    mine = S.compiled_where(Memory, Q(store="self") & Q(owner=world.copilot))
    theirs = S.compiled_where(Memory, Q(store="self") & Q(owner=world.scribe))
    assert mine[1][-1] == world.copilot.pk and theirs[1][-1] == world.scribe.pk
    assert S.compiled_where(Message, Q(channel_id__in=[1, 2])) != S.compiled_where(
        Message, Q(channel_id__in=[1, 3])
    )
    assert "knowledge_message" in S.compiled_where(Message, Q(channel_id__in=[1, 2]))[0]
    assert S.compiled_where(Memory, Q(pk__in=[])) is None  # admits nothing
    assert S.compiled_where(Memory, Q()) == ("TRUE", [])
    assert len(S._compiled) == 6


def test_values_it_cannot_describe_exactly_are_compiled_every_time(world):
    S._compiled.clear()
    when = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    sql, params = S.compiled_where(Memory, Q(created_at__lte=when))
    assert params == [when] and not S._compiled


def test_searches_in_two_scopes_recall_only_their_own_rows(world):
    """The cache must never hand one scope's filter to another."""
    S._compiled.clear()
    dm = factory.make_channel(kind="dm", person=factory.make_person("laura"), agent=world.copilot)
    factory.make_conversation(world.copilot, dm)
    secret = factory.make_memory(world.copilot, "Laura's locker code is 4471", store="private:laura")
    shared = factory.make_conversation(world.copilot, world.general)
    private = world.copilot.conversations.get(channel=dm)
    as_agent = Principal.for_agent(world.copilot)
    for _ in range(2):  # the second round runs on cached filters
        in_dm = memory_search(
            resolve_scope(as_agent, agent=world.copilot, conversation=private), q="locker code"
        )
        in_shared = memory_search(
            resolve_scope(as_agent, agent=world.copilot, conversation=shared), q="locker code"
        )
        assert ("memory", secret.pk) in {i.candidate.key for i in in_dm.items}
        assert ("memory", secret.pk) not in {i.candidate.key for i in in_shared.items}


def test_the_vector_routes_count_admits_exactly_the_rows_visibility_admits(world):
    """The memory vector route counts its scope naming the read stores first
    (routes.memory_count_scope): in a shared channel, a channel-only channel and a DM, that count
    admits the same memories as the visibility filter alone, whoever owns them and whatever their
    store."""
    from django.db import connection

    from memory.recall import routes as R

    for owner in (world.copilot, world.scribe):
        for store in ("shared", "self", "private:alice", "private:bob", "channel:support", "channel:other"):
            factory.make_memory_row(owner, f"{owner.name} {store}", store=store)
            factory.make_memory_row(owner, f"{owner.name} {store} queued", store=store, status="queued")
    principal = Principal.for_agent(world.copilot)
    for channel in (world.general, world.support, world.dm_alice):
        scope = resolve_scope(
            principal, agent=world.copilot, conversation=factory.make_conversation(world.copilot, channel)
        )
        where, params = scope.where(Memory)
        named, named_params = R.memory_count_scope(scope)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id FROM knowledge_memory WHERE {where}", params)
            visible = {row[0] for row in cursor.fetchall()}
            cursor.execute(f"SELECT id FROM knowledge_memory WHERE {named}", named_params)
            counted = {row[0] for row in cursor.fetchall()}
        assert counted == visible and len(visible) >= 4, channel.name
