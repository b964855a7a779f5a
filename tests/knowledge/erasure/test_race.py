"""An erasure racing writes to the same person (threads, real transactions): every message is
either erased whole (no copy of its text anywhere) or kept whole — never half-erased."""

import threading

import pytest
from django.db import close_old_connections, connection

from knowledge.erasure.services import erasure_apply
from knowledge.models import ErasedItem, Message
from tests import factory
from tests.knowledge.erasure.sweep import database_rows_holding
from tests.knowledge.erasure.test_erasure import ADMIN

N = 30


@pytest.mark.django_db(transaction=True)
def test_an_erasure_racing_messages_from_the_person_leaves_no_half_erased_message(world):
    factory.post_messages(world.dm_alice, [{"speaker": "alice", "text": "racetokenseed first words"}])
    start = threading.Barrier(2)
    errors = []

    def writer():
        try:
            start.wait()
            for i in range(N):
                factory.post_messages(
                    world.dm_alice, [{"speaker": "alice", "text": f"racetoken{i:03d}x said"}]
                )
                factory.post_messages(
                    world.general, [{"speaker": "alice", "text": f"racetoken{i:03d}y said"}]
                )
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    start.wait()
    erasure_apply(actor=ADMIN, kind="person", ref="alice", reason="race")
    thread.join()

    assert errors == []
    erased = set(ErasedItem.objects.filter(kind="message").values_list("ref", flat=True))
    assert len(erased) >= 1
    for i in range(N):
        for side in "xy":
            token = f"racetoken{i:03d}{side}"
            kept = Message.objects.filter(text__contains=token).values_list("pk", flat=True)
            holding = database_rows_holding(token)
            if kept:
                assert str(kept[0]) not in erased and "knowledge_message.text" in holding
            else:
                assert holding == [], f"{token} half erased: {holding}"
