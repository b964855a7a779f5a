"""The embedding backlog job: what lacks a vector gets one from the current model, in the
worker; a model change is a backlog; edits clear the vector."""

import io
import os
import socket
import threading
import time
from datetime import timedelta

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction
from django.test import override_settings
from django.utils import timezone

from knowledge.embeddings import embedder as embeddings
from knowledge.embeddings.backlog import (
    BACKLOG,
    CHUNK,
    LANE_LOCK,
    backlog_counts,
    backlog_progress,
    claim_batch,
    coverage,
    embed_batch,
    run_backlog,
)
from knowledge.embeddings.tasks import embedding_backlog_run
from knowledge.memories.rows import memory_row_revise
from knowledge.models import EmbeddingClaim, Memory, Message, MessageVector
from tests import factory


def test_ingestion_leaves_vectors_to_the_worker_which_embeds_everything(
    world, django_capture_on_commit_callbacks
):
    memory = factory.make_memory_row(world.copilot, "Alice prefers email")
    rejected = factory.make_memory_row(world.copilot, "never recalled", status="rejected")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        factory.post_messages(world.general, [{"speaker": "alice", "text": f"hello {i}"} for i in range(3)])
    assert len(callbacks) == 1  # the backlog job is queued after commit, not run in the request
    assert not MessageVector.objects.exists()
    assert backlog_counts() == {"memories": 1, "messages": 3, "episodes": 0}

    done = embedding_backlog_run()
    assert done == {"memories": 1, "messages": 3, "episodes": 0}
    assert backlog_counts() == {"memories": 0, "messages": 0, "episodes": 0}
    memory.refresh_from_db()
    assert memory.embedding_model == embeddings.model_name() and len(memory.embedding) == 384
    assert Memory.objects.get(pk=rejected.pk).embedding is None
    assert embedding_backlog_run() == {"memories": 0, "messages": 0, "episodes": 0}  # idempotent


def test_the_queued_job_runs_after_commit(world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        factory.post_messages(world.general, [{"speaker": "alice", "text": "embedded by the kicked job"}])
    assert MessageVector.objects.get(message=Message.objects.get()).model == embeddings.message_model_name()


def test_a_new_text_and_a_new_model_make_backlog(world):
    memory = factory.make_memory_row(world.copilot, "The office opens at 8")
    factory.embed_all()
    with transaction.atomic():
        locked = Memory.objects.select_for_update().get(pk=memory.pk)
        memory_row_revise(
            memory=locked, text="The office opens at 9", author_kind="person", author_name="rita"
        )
    assert backlog_counts()["memories"] == 1
    factory.embed_all()
    with override_settings(
        BRAIN_EMBEDDINGS="openai",
        BRAIN_EMBEDDINGS_BASE_URL="http://127.0.0.1:9",
        BRAIN_EMBEDDINGS_MODEL="other",
    ):
        assert backlog_counts()["memories"] == 1  # vectors of another model do not count
        result = embedding_backlog_run()
        assert "error" in result  # the endpoint is down: nothing written, the reason reported
        assert coverage()["memories"] == {"total": 1, "embedded": 0, "backlog": 1}
    assert coverage()["memories"] == {"total": 1, "embedded": 1, "backlog": 0}


@override_settings(BRAIN_EMBEDDINGS="none")
def test_with_embeddings_off_the_job_does_nothing(world):
    factory.make_memory_row(world.copilot, "x")
    assert "skipped" in embedding_backlog_run()
    assert backlog_counts() == {"memories": 0, "messages": 0, "episodes": 0}


def test_renaming_an_entry_sends_its_blocks_back_to_the_backlog(world, django_capture_on_commit_callbacks):
    from knowledge.entries.services import entry_update

    entry = factory.make_entry(world.copilot, name="Office hours", blocks=["Opens at 8", "Closes at 17"])
    other = factory.make_entry(world.copilot, name="Parking", blocks=["Level -2"])
    factory.embed_all()
    assert backlog_counts()["memories"] == 0
    before = Memory.objects.get(entry=entry, text="Opens at 8").embedding

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        entry_update(actor=factory.SYSTEM, entry_id=entry.pk, summary="When the office is open")
    assert callbacks == [] and backlog_counts()["memories"] == 0  # only the name is embedded
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        entry_update(actor=factory.SYSTEM, entry_id=entry.pk, name="Opening hours")
    assert len(callbacks) == 1  # the backlog job is kicked after commit
    assert backlog_counts()["memories"] == 2
    assert Memory.objects.get(entry=other).embedding_model == embeddings.model_name()

    factory.embed_all()
    after = Memory.objects.get(entry=entry, text="Opens at 8").embedding
    assert after is not None and list(before) != list(after)  # now "Opening hours: Opens at 8"


@pytest.mark.django_db(transaction=True)  # lanes are threads with their own connections
@override_settings(BRAIN_EMBEDDING_KICK=False)  # committed messages would kick the job inline
def test_lanes_share_the_backlog_and_embed_each_row_once(world):
    texts = [f"note {i}: the deploy of service {i % 7} needs review" for i in range(150)]
    ids = factory.post_messages(world.general, [{"speaker": "alice", "text": t} for t in texts])
    factory.make_memory_row(world.copilot, "Alice prefers email")
    factory.make_entry(world.copilot, name="Office hours", blocks=["Opens at 8", "Closes at 17"])

    reported = []
    done = run_backlog(
        lanes=2,
        batch=16,
        progress=lambda kind, n: reported.append((kind, n, threading.current_thread().name)),
    )

    assert done == {"memories": 3, "messages": 150, "episodes": 0}
    assert sum(n for kind, n, _ in reported if kind == "messages") == 150 and len(reported) >= 10
    # Both lanes embedded: a lane that finds a batch taken by the other goes on past it.
    assert {lane for kind, _, lane in reported if kind == "messages"} == {
        "embedding-lane-0",
        "embedding-lane-1",
    }
    assert backlog_counts() == {"memories": 0, "messages": 0, "episodes": 0}
    stored = {v.message_id: v for v in MessageVector.objects.filter(message_id__in=ids)}
    assert len(stored) == 150 and {v.model for v in stored.values()} == {embeddings.message_model_name()}
    # A lane's single-threaded session gives the vector the shared session gives; a message is
    # embedded with its speaker, after the turn before it.
    expected = embeddings.embed_texts(
        [f"alice: {t}" if i == 0 else f"alice: {texts[i - 1]}\nalice: {t}" for i, t in enumerate(texts)]
    )
    got = np.array([stored[i].embedding for i in ids])
    assert np.allclose(got, expected, atol=1e-4)


@pytest.mark.django_db(transaction=True)
@override_settings(BRAIN_EMBEDDING_KICK=False)
def test_a_lane_that_fails_reports_why_and_writes_nothing(world):
    factory.post_messages(world.general, [{"speaker": "alice", "text": f"hello {i}"} for i in range(40)])
    with override_settings(
        BRAIN_EMBEDDINGS="openai",
        BRAIN_EMBEDDINGS_BASE_URL="http://127.0.0.1:9",
        BRAIN_EMBEDDINGS_MODEL="other",
    ):
        result = run_backlog(lanes=2, batch=8)
    assert "127.0.0.1:9" in result["error"] and result["messages"] == 0
    assert not MessageVector.objects.exists()


def test_the_lanes_of_a_process_share_one_single_threaded_session():
    lanes = embeddings.lane_embedders(2)
    assert lanes == embeddings.lane_embedders(2)  # loaded once per process
    assert lanes[0] is lanes[1] and embeddings.get_embedder() not in lanes
    assert lanes[0]._session.get_session_options().intra_op_num_threads == 1


class SlowModel:
    """The real model, with a pause after each call and a hook run inside it: what a loaded
    machine or a change made while the model runs looks like to the backlog."""

    def __init__(self, pause: float = 0.0, during=None):
        self.real, self.pause, self.during, self.calls, self.in_transaction = (
            embeddings.get_embedder(),
            pause,
            during,
            0,
            [],
        )

    def embed(self, texts):
        self.calls += 1
        self.in_transaction.append(connection.in_atomic_block)
        if self.during:
            self.during()
        time.sleep(self.pause)
        return self.real.embed(texts)


def _messages_kind():
    return next(kind for kind in BACKLOG if kind.name == "messages")


@pytest.mark.django_db(transaction=True)
@override_settings(BRAIN_EMBEDDING_KICK=False)
def test_a_batch_that_outlives_its_deadline_stores_what_it_embedded_and_releases_the_rest(world):
    factory.post_messages(world.general, [{"speaker": "alice", "text": f"hello {i}"} for i in range(200)])
    slow = SlowModel(pause=0.3)
    stored, _ = embed_batch(
        _messages_kind(),
        embeddings.model_name(),
        0,
        batch=200,
        embedder=slow,
        deadline=time.monotonic() + 0.1,
    )
    # One chunk ran, then the deadline had passed: its vectors are stored, the rest let go.
    assert (slow.calls, stored) == (1, CHUNK)
    assert slow.in_transaction == [False]  # no transaction stays open while the model runs
    assert not EmbeddingClaim.objects.exists()
    assert backlog_counts()["messages"] == 200 - CHUNK
    assert run_backlog(lanes=1)["messages"] == 200 - CHUNK  # the next run takes them at once


@pytest.mark.django_db(transaction=True)
@override_settings(BRAIN_EMBEDDING_KICK=False)
def test_a_lane_skips_rows_another_lane_claimed_until_their_claim_expires(world):
    factory.post_messages(world.general, [{"speaker": "alice", "text": f"hello {i}"} for i in range(30)])
    kind, model = _messages_kind(), embeddings.message_model_name()
    first, _ = claim_batch(kind, model, 0, 20)
    second, _ = claim_batch(kind, model, 0, 20)
    assert len(first) == 20 and len(second) == 10 and not set(first) & set(second)
    assert claim_batch(kind, model, 0, 20) == ([], 0)  # everything is claimed: nothing left to look at
    # The lane that held `first` died: once its claim expires, another lane takes the rows over.
    EmbeddingClaim.objects.filter(row_id__in=first).update(until=timezone.now() - timedelta(seconds=1))
    assert claim_batch(kind, model, 0, 50) == (first, first[-1])


@pytest.mark.django_db(transaction=True)
@override_settings(BRAIN_EMBEDDING_KICK=False)
def test_a_memory_revised_while_the_model_runs_keeps_no_stale_vector(world):
    memory = factory.make_memory_row(world.copilot, "The office opens at 8")

    def revise():
        with transaction.atomic():
            locked = Memory.objects.select_for_update().get(pk=memory.pk)
            memory_row_revise(
                memory=locked, text="The office opens at 9", author_kind="person", author_name="rita"
            )

    kind = next(kind for kind in BACKLOG if kind.name == "memories")
    stored, _ = embed_batch(kind, embeddings.model_name(), 0, embedder=SlowModel(during=revise))
    assert stored == 0 and Memory.objects.get(pk=memory.pk).embedding is None
    assert backlog_counts()["memories"] == 1 and not EmbeddingClaim.objects.exists()
    factory.embed_all()
    expected = embeddings.embed_texts(["The office opens at 9"])[0]
    assert np.allclose(Memory.objects.get(pk=memory.pk).embedding, expected, atol=1e-4)


@pytest.mark.django_db(transaction=True)
@override_settings(BRAIN_EMBEDDING_KICK=False)
def test_no_more_lanes_embed_on_a_machine_than_it_has_cores(world):
    factory.post_messages(world.general, [{"speaker": "alice", "text": f"hello {i}"} for i in range(20)])
    cores = os.cpu_count() or 1
    held = []
    for slot in range(cores):  # other worker processes hold every slot of this machine
        other = connections.create_connection("default")
        with other.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_lock(hashtext(%s), %s)", [LANE_LOCK + socket.gethostname(), slot]
            )
        held.append(other)
    try:
        assert run_backlog(lanes=1) == {"memories": 0, "messages": 0, "episodes": 0, "busy": 1}
        assert backlog_counts()["messages"] == 20
    finally:
        for other in held:
            other.close()
    assert run_backlog(lanes=1)["messages"] == 20


@pytest.mark.django_db(transaction=True)
@override_settings(BRAIN_EMBEDDING_KICK=False)
def test_the_backlog_reports_its_rate_and_the_time_left(world):
    assert backlog_progress(0) == {"rate_per_second": 0.0, "seconds_left": 0}
    assert backlog_progress(10) == {"rate_per_second": 0.0, "seconds_left": None}  # nothing moves
    factory.post_messages(world.general, [{"speaker": "alice", "text": f"hello {i}"} for i in range(120)])
    run_backlog(lanes=1)
    # 120 texts since the start of this minute (or the one before, if the clock turned meanwhile):
    # at least a minute is assumed, so at most 2 texts/s, and the time left follows from the rate.
    progress = backlog_progress(240)
    assert 1.0 <= progress["rate_per_second"] <= 2.0
    assert abs(progress["seconds_left"] - 240 / progress["rate_per_second"]) <= 240 / 0.95 - 240


def test_the_embed_backlog_command_drains_everything_and_prints_progress(world):
    factory.make_memory_row(world.copilot, "Alice prefers email")
    factory.post_messages(world.general, [{"speaker": "alice", "text": f"hello {i}"} for i in range(20)])
    out = io.StringIO()
    call_command("embed_backlog", "--every", "0", stdout=out)
    text = out.getvalue()
    assert "21 texts to embed (1 memories, 20 messages, 0 episodes)" in text
    assert "21 of 21 (100 %)" in text and "Embedded 21 texts" in text and "0 left" in text
    assert backlog_counts() == {"memories": 0, "messages": 0, "episodes": 0}
    out = io.StringIO()
    call_command("embed_backlog", stdout=out)
    assert "Nothing to embed." in out.getvalue()


def test_the_embed_backlog_command_takes_one_kind_and_reports_failures(world):
    factory.make_memory_row(world.copilot, "Alice prefers email")
    factory.post_messages(world.general, [{"speaker": "alice", "text": "hello"}])
    call_command("embed_backlog", "--kind", "memories", stdout=io.StringIO())
    assert backlog_counts() == {"memories": 0, "messages": 1, "episodes": 0}
    with (
        override_settings(
            BRAIN_EMBEDDINGS="openai",
            BRAIN_EMBEDDINGS_BASE_URL="http://127.0.0.1:9",
            BRAIN_EMBEDDINGS_MODEL="other",
        ),
        pytest.raises(CommandError, match="Stopped after 0 texts: Embedding endpoint"),
    ):
        call_command("embed_backlog", stdout=io.StringIO())
    with override_settings(BRAIN_EMBEDDINGS="none"), pytest.raises(CommandError, match="Embeddings are off"):
        call_command("embed_backlog", stdout=io.StringIO())
    assert backlog_counts()["messages"] == 1  # nothing written by the failed runs


@pytest.mark.django_db(transaction=True)  # the run and the writer commit, as a worker and a client would
@override_settings(BRAIN_EMBEDDING_KICK=False)
def test_rows_that_arrive_while_the_backlog_drains_are_embedded_in_the_same_run(world):
    factory.post_messages(world.general, [{"speaker": "alice", "text": f"note {i}"} for i in range(40)])
    arrived = []

    def progress(kind, count):
        if kind == "messages" and not arrived:  # memories were drained already in this pass
            arrived.append(factory.make_memory_row(world.copilot, "Alice prefers email"))

    done = run_backlog(lanes=1, batch=16, progress=progress)
    assert done == {"memories": 1, "messages": 40, "episodes": 0}
    assert backlog_counts() == {"memories": 0, "messages": 0, "episodes": 0}


def test_the_speaker_migration_sends_text_only_message_vectors_back_to_the_backlog(world):
    import importlib

    from django.db import connection

    migration = importlib.import_module("knowledge.migrations.0014_message_speaker_indexed")
    (message_id,) = factory.post_messages(
        world.general, [{"speaker": "alice", "text": "the demo moved to Friday"}]
    )
    factory.embed_all()
    with connection.cursor() as cursor:
        cursor.execute(migration.MARK_STALE)
    assert backlog_counts()["messages"] == 1
    factory.embed_all()
    assert backlog_counts()["messages"] == 0
    stored = MessageVector.objects.get(message_id=message_id)
    assert stored.model == embeddings.message_model_name()
    assert np.allclose(
        stored.embedding, embeddings.embed_texts(["alice: the demo moved to Friday"])[0], atol=1e-4
    )


def test_a_message_is_embedded_after_the_turn_before_it_in_its_own_thread(world):
    """The turn before a message in its thread is part of its embedding text (a reply names little
    of what it answers); a thread's first message stands alone, and so does one said after a
    pause; another thread's turns never count, and a long turn before it is cut so the message's
    own text stays whole."""
    from knowledge.embeddings.backlog import PREVIOUS_TURN_CHARS, PREVIOUS_TURN_MINUTES

    now = timezone.now().replace(microsecond=0)
    long_question = "Which database should we pick for the analytics warehouse? " * 10
    rows = [
        ("ana", long_question, "t1", 60),
        ("cai", "Lunch is at noon today", "t2", 59),  # another thread, between the two turns
        ("bo", "Definitely the columnar one, it copes with our event volume", "t1", 58),
        ("ana", "Did the release notes go out?", "t1", 58 - PREVIOUS_TURN_MINUTES - 1),  # after a pause
    ]
    ids = factory.post_messages(
        world.general,
        [{"speaker": s, "text": t, "thread": th, "ts": now - timedelta(minutes=m)} for s, t, th, m in rows],
    )
    factory.embed_all()
    stored = {v.message_id: np.array(v.embedding) for v in MessageVector.objects.filter(message_id__in=ids)}
    alone = embeddings.embed_texts(
        [f"ana: {long_question}", "cai: Lunch is at noon today", "ana: Did the release notes go out?"]
    )
    assert np.allclose(stored[ids[0]], alone[0], atol=1e-4)
    assert np.allclose(stored[ids[1]], alone[1], atol=1e-4)
    assert np.allclose(stored[ids[3]], alone[2], atol=1e-4)
    reply = f"ana: {long_question[:PREVIOUS_TURN_CHARS]}\nbo: {rows[2][1]}"
    assert np.allclose(stored[ids[2]], embeddings.embed_texts([reply])[0], atol=1e-4)
    # What it answers is now near it: closer to the question than its own words alone are.
    question = embeddings.embed_texts(["analytics warehouse database"])[0]
    own = embeddings.embed_texts([f"bo: {rows[2][1]}"])[0]
    assert float(stored[ids[2]] @ question) > float(own @ question) + 0.1


def test_message_vectors_of_an_earlier_recipe_are_backlog_again(world):
    (message_id,) = factory.post_messages(world.general, [{"speaker": "alice", "text": "the demo moved"}])
    factory.embed_all()
    MessageVector.objects.filter(message_id=message_id).update(model=embeddings.model_name())
    assert backlog_counts()["messages"] == 1
    factory.embed_all()
    assert MessageVector.objects.get(message_id=message_id).model == embeddings.message_model_name()
