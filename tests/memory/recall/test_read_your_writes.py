"""Read your writes, every time (issue 49): several clients write and search at once against the
live server, and every memory or message written is found by its own words on the next search,
by the keyword route at once and by the vector route as soon as the backlog has embedded it — in
a DM, in a private store, and in a shared channel among many near-identical messages. And the
same where the scope is over the exact-search limit, so the vector route answers through the
HNSW index (issue 61; `make bench-large` probes it at 1,000,000 messages)."""

import random
import threading
import uuid

import httpx
import pytest
from django.db import connection, transaction

from bench.vector_path import HNSW_INDEXES, vector_path
from knowledge.embeddings.backlog import run_backlog
from knowledge.models import Channel, Memory, MessageVector
from knowledge.principal import Principal
from memory.recall import resolve_scope
from memory.recall import routes as R
from memory.recall.params import VECTOR_EPISODES, VECTOR_KNOWLEDGE
from tests import factory

pytestmark = pytest.mark.django_db(transaction=True)  # real commits, as on a server

CLIENTS = 3
ROUNDS = 2  # per client and target
WORDS = [
    "amber",
    "harbour",
    "violin",
    "glacier",
    "orchard",
    "lantern",
    "falcon",
    "meadow",
    "copper",
    "cinnamon",
    "quartz",
    "tundra",
    "saffron",
    "canyon",
    "pelican",
    "walnut",
    "marble",
    "thistle",
    "comet",
    "bamboo",
]


def sentence(rng: random.Random, token: str) -> str:
    """A text with a token no other text holds, and words drawn at random, so its vector stands
    apart from the others' as its keyword does."""
    return f"{token} {' '.join(rng.sample(WORDS, 6))} {rng.randint(100, 999)}"


class Agent:
    """One client: an HTTP session with an agent's token against the live server."""

    def __init__(self, url: str, token: str, agent: str):
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.agent = agent

    def post(self, path: str, body: dict) -> dict:
        response = self.http.post(path, json=body)
        assert response.status_code in (200, 201), (path, response.status_code, response.content[:500])
        return response.json()

    def found(self, conversation: int, q: str, routes: list[str], kind: str, pk: int) -> bool:
        body = {"agent": self.agent, "conversation": conversation, "q": q, "k": 10, "routes": routes}
        result = self.post("/api/memory/search", body)
        return any(r["kind"] == kind and r["id"] == pk for r in result["results"])


def embedded(kind: str, pk: int) -> bool:
    if kind == "message":
        return MessageVector.objects.filter(message_id=pk).exists()
    return Memory.objects.filter(pk=pk).exclude(embedding_model="").exists()


def embed_until(kind: str, pk: int) -> None:
    """Drain the backlog (what the worker does) until this row has its vector: another client's
    drain may hold it for a moment (SKIP LOCKED)."""
    for _ in range(200):
        run_backlog(max_seconds=30)
        if embedded(kind, pk):
            return
    raise AssertionError(f"{kind} {pk} never got a vector")


@pytest.fixture
def places(world, settings):
    """The scribe (trusted: its writes are active at once) in a DM with alice — where it also
    writes into alice's private store — and in a shared channel."""
    settings.BRAIN_EMBEDDING_KICK = False  # the clients drain the backlog themselves, as a worker
    dm = factory.make_channel("dm-alice-scribe", kind=Channel.KIND_DM, person=world.alice, agent=world.scribe)
    return {
        "dm": factory.make_conversation(world.scribe, dm),
        "shared": factory.make_conversation(world.scribe, world.general),
        "channels": {"dm": dm, "shared": world.general},
    }


def test_every_write_is_found_by_its_own_words_on_the_next_search(world, places, live_server):
    # The shared channel holds many near-identical messages: the shape on which HNSW left a DM's
    # messages out of the nearest (issue 49).
    factory.post_messages(
        world.general,
        [{"speaker": "bob", "text": f"Support note {i % 7}: ticket handled"} for i in range(400)],
    )
    factory.post_messages(places["channels"]["dm"], [{"speaker": "alice", "text": "Hi, it's Alice."}])
    factory.embed_all()
    with connection.cursor() as cursor:  # what autovacuum does on a server: the planner knows the rows
        cursor.execute("ANALYZE knowledge_message, knowledge_messagevector, knowledge_memory")
    failures: list[str] = []
    errors: list[BaseException] = []

    def client(n: int) -> None:
        rng = random.Random(n)
        me = Agent(live_server.url, world.tokens["scribe"], "scribe")
        try:
            for round_ in range(ROUNDS):
                for target in ("dm", "private", "shared"):
                    token = f"zq{uuid.uuid4().hex[:10]}"
                    text = sentence(rng, token)
                    conversation = places["dm" if target != "shared" else "shared"].pk
                    if target == "private":
                        kind, keyword, vector = "memory", "keyword_knowledge", "vector_knowledge"
                        pk = me.post("/api/memory", {"scope": "private:alice", "text": text})["id"]
                    else:
                        kind, keyword, vector = "message", "keyword_messages", "vector_episodes"
                        channel = places["channels"][target].name
                        row = {"channel": channel, "speaker": "alice", "text": text, "thread": token}
                        pk = me.post("/api/messages", row)["id"]
                    where = f"client {n} round {round_} {target} {kind} {pk}"
                    if not me.found(conversation, token, [keyword], kind, pk):
                        failures.append(f"{where}: keyword route missed {token!r}")
                    embed_until(kind, pk)
                    if not me.found(conversation, text, [vector], kind, pk):
                        failures.append(f"{where}: vector route missed {text!r}")
        except BaseException as exc:  # handed to the test's thread below
            errors.append(exc)
        finally:
            me.http.close()
            connection.close()  # this thread's own connection (its backlog drains)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    assert failures == []


def fill_over_the_limit(channel, owner, n: int) -> None:
    """`n` messages in `channel` and `n` memories in the shared store, inserted set-wise, each
    with a vector copied with noise from one of 40 really embedded chat texts — the shape of
    `make bench-large`'s world: a scope over EXACT_MAX_ROWS in seconds, tables large enough that
    the planner reads the HNSW index for the nearest rows (at a few hundred rows it sorts them)."""
    from bench.recall_seed import bulk_memories
    from bench.textgen import TextGen
    from knowledge.embeddings import embedder as embeddings
    from memory.recall.routes import vector_literal

    (first,) = factory.post_messages(channel, [{"speaker": "bob", "text": "filler note 0"}])
    bulk_memories([{"owner": owner, "store": "shared", "text": f"filler memory {i}"} for i in range(n)])
    gen = TextGen(61)
    bases = [vector_literal(v) for v in embeddings.embed_texts([gen.message() for _ in range(40)])]
    noisy = (
        "l2_normalize((SELECT array_agg(x + (random() - 0.5) * 0.02 ORDER BY k) "
        "FROM unnest(b.embedding::real[]) WITH ORDINALITY u(x, k) WHERE {} > 0)::vector)"
    )
    # The HNSW indexes are built again once the rows are in (one build instead of thousands of
    # inserts), in the same transaction: a failure leaves them as they were.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = ANY(%s)", [list(HNSW_INDEXES)])
        definitions = [row[0] for row in cursor.fetchall()]
        cursor.execute("DROP INDEX " + ", ".join(HNSW_INDEXES))
        cursor.execute(
            "CREATE TEMP TABLE base ON COMMIT DROP AS SELECT n - 1 AS n, embedding "
            "FROM unnest(%s::vector[]) WITH ORDINALITY u(embedding, n)",
            [bases],
        )
        cursor.execute(
            "INSERT INTO knowledge_message (channel_id, thread, store, speaker_person_id, speaker_name, text, ts, "
            "external_id, posted_by, learn, created_at) SELECT channel_id, '', store, speaker_person_id, "
            "speaker_name, 'filler note ' || g, ts, 'filler-' || g, posted_by, learn, now() "
            "FROM knowledge_message, generate_series(1, %s) g WHERE id = %s",
            [n, first],
        )
        cursor.execute(
            "INSERT INTO knowledge_messagevector (message_id, model, embedding) SELECT m.id, %s, "
            + noisy.format("m.id")
            + " FROM knowledge_message m JOIN base b ON b.n = mod(m.id, 40) WHERE m.channel_id = %s",
            [embeddings.message_model_name(), channel.pk],
        )
        cursor.execute(
            "UPDATE knowledge_memory m SET embedding = "
            + noisy.format("m.id")
            + ", embedding_model = %s FROM base b WHERE b.n = mod(m.id, 40) AND m.owner_id = %s "
            "AND m.embedding_model = ''",
            [embeddings.model_name(), owner.pk],
        )
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no deferred check may wait on the tables indexed
        for definition in definitions:
            cursor.execute(definition)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_message, knowledge_messagevector, knowledge_memory")


def test_a_write_is_found_through_hnsw_when_the_scope_is_over_the_exact_limit(
    world, places, live_server, monkeypatch
):
    """A scope over EXACT_MAX_ROWS (messages of a channel, memories of a store) is searched
    through the HNSW index with iterative scans, and a write is found there by the vector route
    once embedded. The statement's own plan (EXPLAIN ANALYZE, bench.vector_path) shows which
    part answered, so a search that fell back to the exact part, or a plan that sorted instead
    of reading the index, fails the test."""
    rng = random.Random(61)
    fill_over_the_limit(world.general, world.scribe, R.EXACT_MAX_ROWS + 300)
    conversation = places["shared"]
    scope = resolve_scope(Principal.for_agent(world.scribe), agent=world.scribe, conversation=conversation)
    me = Agent(live_server.url, world.tokens["scribe"], "scribe")
    try:
        token = f"zq{uuid.uuid4().hex[:10]}"
        texts = {"memory": sentence(rng, token), "message": sentence(rng, token)}
        ids = {
            "memory": me.post("/api/memory", {"scope": "shared", "text": texts["memory"]})["id"],
            "message": me.post(
                "/api/messages", {"channel": world.general.name, "speaker": "alice", "text": texts["message"]}
            )["id"],
        }
        routes = {"memory": VECTOR_KNOWLEDGE, "message": VECTOR_EPISODES}
        for kind, pk in ids.items():
            embed_until(kind, pk)
            assert me.found(conversation.pk, texts[kind], [routes[kind]], kind, pk), (
                f"{kind} missed through HNSW"
            )
            assert vector_path(scope, routes[kind], texts[kind])[0] == "hnsw"
        # The witness tells the paths apart: with the limit above these scopes, the exact part answers.
        monkeypatch.setattr(R, "EXACT_MAX_ROWS", 100_000)
        for kind in ids:
            assert vector_path(scope, routes[kind], texts[kind])[0] == "exact"
    finally:
        me.http.close()
