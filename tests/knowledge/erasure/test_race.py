"""An erasure racing writes to the same person (threads, real transactions): every message is
either erased whole (no copy of its text anywhere) or kept whole — never half-erased."""

import threading
import time

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


@pytest.mark.django_db(transaction=True)
def test_forgetting_a_person_waits_for_a_memory_being_written_to_their_store_and_takes_it(world):
    """A memory written to Alice's private store in a transaction still open when the erasure
    starts: the erasure waits for it to commit, then takes it — it is not left behind, committed
    just after the erasure's plan was read."""
    from django.db import transaction

    from knowledge.models import Memory

    written, go, erased = threading.Event(), threading.Event(), threading.Event()
    made, errors = [], []

    def writer():
        try:
            with transaction.atomic():
                made.append(
                    factory.make_memory(world.copilot, "racetokenmem kept in flight", store="private:alice")
                )
                written.set()
                go.wait(20)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            written.set()
        finally:
            connection.close()

    def eraser():
        try:
            erasure_apply(actor=ADMIN, kind="person", ref="alice", reason="race")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            erased.set()
            connection.close()

    factory.make_memory(world.copilot, "racetokenmem said before", store="private:alice")
    threads = [threading.Thread(target=writer)]
    threads[0].start()
    assert written.wait(20)
    threads.append(threading.Thread(target=eraser))
    threads[1].start()
    assert not erased.wait(1.5), "the erasure did not wait for the write in flight"
    go.set()
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert Memory.objects.get(pk=made[0].pk).status == "erased"
    assert database_rows_holding("racetokenmem") == []


@pytest.mark.django_db(transaction=True)
def test_a_message_committing_while_a_person_is_being_locked_for_erasure_deadlocks_neither(world):
    """A message into a person's DM checks its foreign keys when it commits (Django's are
    deferred): the channel's row first, then the speaker's. The erasure locks the same two rows;
    taken in the other order, a commit landing between the erasure's two locks deadlocked (one
    side failed with "deadlock detected"). Here the message commits exactly then: the erasure
    pauses after its first lock until the commit has had time to block."""
    from django.db import transaction

    inserted, commit_now = threading.Event(), threading.Event()
    errors = []

    def writer():
        try:
            with transaction.atomic():
                factory.post_messages(world.dm_alice, [{"speaker": "alice", "text": "racetokenlock late"}])
                inserted.set()
                commit_now.wait(20)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            inserted.set()
        finally:
            connection.close()

    def pause_after_first_lock(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "FOR UPDATE" in sql and not commit_now.is_set():
            commit_now.set()
            time.sleep(2.5)  # longer than PostgreSQL's deadlock_timeout (1 s): the commit blocks first
        return result

    def eraser():
        try:
            with connection.execute_wrapper(pause_after_first_lock):
                erasure_apply(actor=ADMIN, kind="person", ref="alice", reason="race")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    factory.post_messages(world.dm_alice, [{"speaker": "alice", "text": "racetokenlock said before"}])
    threads = [threading.Thread(target=writer)]
    threads[0].start()
    assert inserted.wait(20)
    threads.append(threading.Thread(target=eraser))
    threads[1].start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert database_rows_holding("racetokenlock said") == []
    # The late message committed after the erasure: kept whole, as any message said afterwards.
    assert Message.objects.filter(text="racetokenlock late").count() == 1
