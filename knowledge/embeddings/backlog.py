"""Vectors and the embedding backlog: every memory (loose or entry block), message and episode
without a vector from the current model gets one, in the worker, in batches.

What counts as backlog is defined once here (`BACKLOG`) and reported by `backlog_counts()` and
`coverage()` (GET /api/status); the worker drains it through
knowledge.embeddings.tasks.embedding_backlog_run. It lives in `knowledge` so status (curation),
the ingestion that queues the job and the job itself read one definition.

A batch is claimed by one statement that commits at once (rows in `knowledge_embeddingclaim`,
skipped by other lanes and workers until written or expired), embedded with no transaction open,
and written back by one statement that also checks each row still lacks a current vector and
still has the text it was read with (`Kind.version`): a memory revised meanwhile keeps its
cleared vector and is embedded again. A machine drains the backlog in lanes, one per core over
all its worker processes (run_backlog), sharing one model session per process."""

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

from knowledge.embeddings import embedder as embeddings
from knowledge.models import Episode, Memory, Message, MessageVector

log = logging.getLogger(__name__)

BATCH = 256
# Texts per model call inside a batch (sorted by length first, so each call pads little); the
# job's deadline is checked between calls.
CHUNK = 64
# A message is embedded after the turn before it in its thread (embedding_text) when that turn was
# said at most this long before it: the same sitting. A thread's first message, or one after a
# pause, stands alone — an unrelated message of hours before would only blur it (measured on the
# team's own set, docs/RECALL.md).
PREVIOUS_TURN_MINUTES = 30
LINGER_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class Kind:
    """One kind of row that gets a vector. `t` is the row's table; the vector lives in the row
    itself (`embedding`, `embedding_model`) or, for messages, in a side table aliased `v`."""

    name: str
    table: str
    select: str  # columns to embed, with the row id first
    join: str = ""
    where: str = "TRUE"  # which rows are worth a vector at all
    side_table: str = ""  # messages: knowledge_messagevector (message_id, model, embedding)
    # What the embedded text is made of, as one value: a vector is stored only if its row still
    # has the version it was read at (a memory's text may change while the model runs).
    version: str = "''"
    lock_first: str = ""  # rows to lock FOR SHARE before the version is checked

    def model_for(self, base: str) -> str:
        """The name this kind's vectors are recorded with when `base` embeds them (a message's
        names its recipe too: embedder.message_model_name)."""
        return embeddings.message_model_name(base) if self.side_table else base

    def model(self) -> str:
        """The name this kind's vectors are made under now ('' when embeddings are off)."""
        return self.model_for(embeddings.model_name())

    @property
    def current_sql(self) -> str:
        """True when the row has a vector from the model given as the parameter."""
        return "v.model = %s" if self.side_table else "t.embedding_model = %s"

    @property
    def stale_sql(self) -> str:
        """True when the row lacks a vector from the model given as the parameter, for the claim:
        a message's vector is looked up by its id, row by row as the claim walks the ids, never
        by a join the planner may turn into a scan of every vector (at 100k messages that scan
        took a fifth of the backlog's time). Same-run A/B on the 100k recall world, 15,000
        messages' vectors dropped and re-embedded (load 1.9–2.5): the join 113.5 texts/s, 63 % of
        the model alone, 25.8 s claiming; this 158.9 and 173.0 texts/s, 91–92 %, 0.7–0.8 s."""
        if self.side_table:
            return f"(SELECT v.model FROM {self.side_table} v WHERE v.message_id = t.id) IS DISTINCT FROM %s"
        return f"({self.current_sql}) IS NOT TRUE"

    @property
    def vector_join(self) -> str:
        return f"LEFT JOIN {self.side_table} v ON v.message_id = t.id" if self.side_table else ""


BACKLOG = [
    Kind(
        "memories",
        Memory._meta.db_table,
        "t.id, t.key, t.text, e.name",
        join="LEFT JOIN knowledge_entry e ON e.id = t.entry_id",
        # Rejected, superseded, invalidated and expired memories are never recalled.
        where="t.status IN ('queued', 'active')",
        version=(
            "md5(concat_ws(chr(31), t.key, t.text, "
            "(SELECT e2.name FROM knowledge_entry e2 WHERE e2.id = t.entry_id)))"
        ),
        lock_first=(
            "SELECT 1 FROM knowledge_entry e WHERE e.id IN "
            "(SELECT m.entry_id FROM knowledge_memory m WHERE m.id = ANY(%s)) FOR SHARE OF e"
        ),
    ),
    Kind(
        "messages",
        Message._meta.db_table,
        "t.id, t.speaker_name, t.text, p.speaker_name, p.text",
        # The turn before it in its thread, when said in the same sitting (index message_thread_ts),
        # for its embedding text.
        join=(
            "LEFT JOIN LATERAL (SELECT p.speaker_name, p.text FROM knowledge_message p "
            "WHERE p.channel_id = t.channel_id AND p.thread = t.thread AND p.ts <= t.ts "
            f"AND p.ts >= t.ts - interval '{PREVIOUS_TURN_MINUTES} minutes' "
            "AND (p.ts < t.ts OR p.id < t.id) ORDER BY p.ts DESC, p.id DESC LIMIT 1) p ON TRUE"
        ),
        side_table=MessageVector._meta.db_table,
    ),
    Kind(
        "episodes",
        Episode._meta.db_table,
        "t.id, t.topic, t.summary, t.likely_question, t.resolution",
        version="md5(concat_ws(chr(31), t.topic, t.summary, t.likely_question, t.resolution))",
    ),
]


# How much of the turn before a message its embedding text carries: most turns whole, and never so
# much that the message's own text is cut (the model reads 256 tokens).
PREVIOUS_TURN_CHARS = 300


def message_own_text(speaker: str, text: str) -> str:
    """A message's own words as it is embedded: its speaker, then its text ("Ana: …")."""
    return f"{speaker}: {text}"


def embedding_text(kind: str, row: tuple) -> str:
    """The text a row is embedded as. A block carries its entry's name (the block alone often
    lacks its subject); a memory with a key carries the key; a message its speaker ("Ana: …"),
    because questions name people, after the turn before it in its thread (MESSAGE_RECIPE)."""
    if kind == "memories":
        _, key, text, entry_name = row
        head = entry_name or key
        return f"{head}: {text}" if head else text
    if kind == "episodes":
        return "\n".join(p for p in row[1:] if p)
    _, speaker, text, previous_speaker, previous_text = row
    own = message_own_text(speaker, text)
    if previous_text is None:
        return own
    return f"{previous_speaker}: {previous_text[:PREVIOUS_TURN_CHARS]}\n{own}"


def backlog_counts() -> dict[str, int]:
    """Rows per kind that lack a vector from the current model (0 when embeddings are off)."""
    if not embeddings.model_name():
        return {k.name: 0 for k in BACKLOG}
    out = {}
    with connection.cursor() as cursor:
        for kind in BACKLOG:
            cursor.execute(
                f"SELECT count(*) FROM {kind.table} t {kind.vector_join} "
                f"WHERE ({kind.where}) AND ({kind.current_sql}) IS NOT TRUE",
                [kind.model()],
            )
            out[kind.name] = cursor.fetchone()[0]
    return out


def coverage() -> dict[str, dict]:
    """Per kind: rows worth a vector (`total`), how many have one from the current model
    (`embedded`), and the rest, the backlog (`backlog`; 0 when embeddings are off) — one count
    query per kind."""
    model = embeddings.model_name()
    out = {}
    with connection.cursor() as cursor:
        for kind in BACKLOG:
            cursor.execute(
                f"SELECT count(*), count(*) FILTER (WHERE {kind.current_sql}) FROM {kind.table} t "
                f"{kind.vector_join} WHERE {kind.where}",
                # With embeddings off nothing is current; PostgreSQL text cannot hold NUL, so the
                # stand-in is a name no model has.
                [kind.model() or "(embeddings off)"],
            )
            total, current = cursor.fetchone()
            out[kind.name] = {"total": total, "embedded": current, "backlog": total - current if model else 0}
    return out


def _vector_sql(vector) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


# How long a claim holds its rows when its lane dies without releasing them. A lane's batch is
# written (or let go) before its deadline, and a job's deadline is far below this.
CLAIM_SECONDS = 600


@dataclass
class Timings:
    """Seconds a drain spent per step, summed over its batches: what the model costs against
    what the database costs (reported by run_backlog and `python -m bench ingest`)."""

    claim: float = 0.0
    read: float = 0.0
    embed: float = 0.0
    write: float = 0.0

    def add(self, other: "Timings") -> None:
        for name in ("claim", "read", "embed", "write"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict:
        return {name: round(getattr(self, name), 3) for name in ("claim", "read", "embed", "write")}


def claim_batch(kind: Kind, model: str, after_id: int, batch: int) -> tuple[list[int], int]:
    """Claim up to `batch` backlog rows of `kind` with ids above `after_id`, by one statement that
    commits at once: rows another lane claimed are skipped, a claim left by a dead lane is taken
    over once it expired. Returns the claimed ids in order and the last id looked at (`after_id`
    when nothing is left): a lane that lost every row of its batch to a faster one goes on past
    them instead of taking the backlog for done."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH todo AS (SELECT t.id FROM {kind.table} t "
            f"WHERE t.id > %s AND ({kind.where}) AND {kind.stale_sql} "
            f"AND NOT EXISTS (SELECT 1 FROM knowledge_embeddingclaim c "
            f"WHERE c.kind = %s AND c.row_id = t.id AND c.until > now()) ORDER BY t.id LIMIT %s), "
            f"claimed AS (INSERT INTO knowledge_embeddingclaim AS c (kind, row_id, until) "
            f"SELECT %s, id, now() + make_interval(secs => %s) FROM todo "
            f"ON CONFLICT (kind, row_id) DO UPDATE SET until = EXCLUDED.until WHERE c.until <= now() "
            f"RETURNING c.row_id) "
            f"SELECT (SELECT max(id) FROM todo), ARRAY(SELECT row_id FROM claimed ORDER BY row_id)",
            [after_id, model, kind.name, batch, kind.name, CLAIM_SECONDS],
        )
        last, claimed = cursor.fetchone()
        return claimed, last or after_id


def claims_release(kind: Kind, ids: list[int]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM knowledge_embeddingclaim WHERE kind = %s AND row_id = ANY(%s)", [kind.name, ids]
        )


def _counted(stored: int) -> None:
    """Add `stored` to this minute's count of embedded texts (EmbeddingMinute)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_embeddingminute (minute, embedded) VALUES (date_trunc('minute', now()), %s) "
            "ON CONFLICT (minute) DO UPDATE SET embedded = knowledge_embeddingminute.embedded + EXCLUDED.embedded",
            [stored],
        )


def _read(kind: Kind, ids: list[int]) -> list[tuple]:
    """The claimed rows' columns to embed, then their version (Kind.version) last."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {kind.select}, {kind.version} FROM {kind.table} t {kind.join} "
            f"WHERE t.id = ANY(%s) AND ({kind.where}) ORDER BY t.id",
            [ids],
        )
        return cursor.fetchall()


def _write(kind: Kind, model: str, rows: list[tuple], vectors, claimed: list[int]) -> int:
    """Store the vectors of `rows` in one statement, each only if its row still has the version
    it was read at and still lacks a vector from `model`, and end the claims of `claimed`; one
    short transaction. Returns how many vectors were stored."""
    ids, literals, versions = [r[0] for r in rows], [_vector_sql(v) for v in vectors], [r[-1] for r in rows]
    with transaction.atomic(), connection.cursor() as cursor:
        if kind.side_table:  # messages are never edited: no version to check
            cursor.execute(
                f"INSERT INTO {kind.side_table} AS v (message_id, model, embedding) "
                f"SELECT d.id, %s, d.v::vector FROM unnest(%s::bigint[], %s::text[]) AS d(id, v) "
                f"ON CONFLICT (message_id) DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding "
                f"WHERE v.model <> EXCLUDED.model",
                [model, ids, literals],
            )
        else:
            if kind.lock_first:
                # Wait for a change of what the text is embedded with (an entry's rename) that is
                # under way, so the version below is read after it; a later one waits for us.
                cursor.execute(kind.lock_first, [ids])
            cursor.execute(
                f"UPDATE {kind.table} t SET embedding = d.v::vector, embedding_model = %s "
                f"FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS d(id, v, version) "
                f"WHERE t.id = d.id AND t.embedding_model <> %s AND {kind.version} = d.version",
                [model, ids, literals, versions, model],
            )
        stored = cursor.rowcount
        claims_release(kind, claimed)
        if stored:
            _counted(stored)
    return stored


def embed_batch(
    kind: Kind,
    model: str,
    after_id: int,
    batch: int = BATCH,
    embedder=None,
    deadline: float = float("inf"),
    timings: Timings | None = None,
) -> tuple[int, int]:
    """Claim, embed and store one batch of `kind` with ids above `after_id`, `model` being the
    embedder's name (Kind.model_for names the vectors). No transaction is open while the model
    runs: the claim commits at once, the vectors are written by one short statement. The model
    runs in chunks and the deadline is checked between them: past it, what was embedded is
    stored and the rest of the claim released. Returns (rows embedded, last id looked at);
    (0, after_id) when nothing is left."""
    model = kind.model_for(model)
    timings = timings if timings is not None else Timings()
    started = time.perf_counter()
    claimed, last = claim_batch(kind, model, after_id, batch)
    timings.claim += time.perf_counter() - started
    if not claimed:
        return 0, last
    try:
        started = time.perf_counter()
        rows = _read(kind, claimed)
        timings.read += time.perf_counter() - started
        started = time.perf_counter()
        texts = [embedding_text(kind.name, r[:-1]) for r in rows]
        order = sorted(range(len(rows)), key=lambda i: len(texts[i]))
        rows, texts = [rows[i] for i in order], [texts[i] for i in order]
        vectors = []
        for start in range(0, len(texts), CHUNK):
            if start and time.monotonic() > deadline:
                break
            vectors.extend(embeddings.embed_texts(texts[start : start + CHUNK], embedder))
        timings.embed += time.perf_counter() - started
    except BaseException:
        claims_release(kind, claimed)
        raise
    started = time.perf_counter()
    stored = _write(kind, model, rows[: len(vectors)], vectors, claimed)
    timings.write += time.perf_counter() - started
    return stored, last


# Lanes embedding at once on one machine, over every worker process: one per core (see
# run_backlog). A lane holds a PostgreSQL advisory lock on one of this machine's slots.
LANE_LOCK = "brain-embedding-lane:"


def _lane_slot_take(slots: int) -> int | None:
    """Take a free lane slot of this machine on this thread's connection (None: all busy)."""
    with connection.cursor() as cursor:
        for slot in range(slots):
            cursor.execute(
                "SELECT pg_try_advisory_lock(hashtext(%s), %s)", [LANE_LOCK + socket.gethostname(), slot]
            )
            if cursor.fetchone()[0]:
                return slot
    return None


def _lane_slot_give(slot: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_unlock(hashtext(%s), %s)", [LANE_LOCK + socket.gethostname(), slot]
        )


# The rate shown on Status is over this many recent minutes; older counts are dropped.
RATE_MINUTES = 5


def backlog_progress(backlog: int) -> dict:
    """How fast the backlog drains now and when it will be done: texts embedded per second over
    the last RATE_MINUTES (from the first minute with work in that window), and the seconds left
    at that rate for `backlog` texts (None when nothing was embedded lately)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(embedded), 0), extract(epoch FROM now() - min(minute)) "
            "FROM knowledge_embeddingminute WHERE minute >= date_trunc('minute', now()) - make_interval(mins => %s)",
            [RATE_MINUTES],
        )
        embedded, seconds = cursor.fetchone()
    rate = embedded / max(float(seconds or 0), 60.0) if embedded else 0.0
    return {
        "rate_per_second": round(rate, 1),
        "seconds_left": round(backlog / rate) if rate and backlog else (0 if not backlog else None),
    }


def run_backlog(
    *,
    max_seconds: float = 50.0,
    batch: int = BATCH,
    kinds=None,
    lanes: int | None = None,
    progress=None,
    linger_seconds: float = 0.0,
    timings: Timings | None = None,
) -> dict:
    """Embed backlog rows until none is left (and none arrived for `linger_seconds`) or
    `max_seconds` pass, in `lanes` threads (default BRAIN_EMBEDDING_LANES; 0: one per core).

    At most one lane per core embeds on a machine, over all its worker processes and jobs: a lane
    first takes one of the machine's slots (an advisory lock on its own connection); a lane that
    finds none free ends at once, so a second job beside a draining one returns with nothing to
    do instead of slowing it down. A process loads one single-threaded model session that all its
    lanes share (one copy of the model per process; lane_embedders). `progress(kind, count)` is
    called after every stored batch, from the lane's thread; `timings` collects the seconds per
    step. Returns counts per kind, `busy`: how many lanes found every slot taken (when any did),
    and, when the embedder failed, why."""
    if not embeddings.enabled():
        return {"skipped": "embeddings are off (BRAIN_EMBEDDINGS=none)"}
    model = embeddings.model_name()
    deadline = time.monotonic() + max_seconds
    selected = [kind for kind in BACKLOG if not kinds or kind.name in kinds]
    cores = os.cpu_count() or 1
    lanes = lanes if lanes is not None else settings.BRAIN_EMBEDDING_LANES
    lanes = max(1, lanes or cores)
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM knowledge_embeddingminute WHERE minute < now() - make_interval(mins => %s)",
            [RATE_MINUTES * 2],
        )
    slots = max(cores, lanes)  # a lane count asked for explicitly is honoured (tests, the command)
    results: list = [None] * lanes
    steps = [Timings() for _ in range(lanes)]

    def lane(i):
        slot = _lane_slot_take(slots)
        if slot is None:  # before the model is loaded: a job with nothing to do costs nothing
            results[i] = {"busy": 1}
            return
        try:
            embedder = embeddings.lane_embedders(lanes)[i]
            results[i] = _drain(
                selected, model, deadline, batch, embedder, progress, linger_seconds, steps[i]
            )
        except embeddings.EmbeddingError as exc:
            log.warning("embedding backlog stopped: %s", exc)
            results[i] = {"error": str(exc)}
        finally:
            _lane_slot_give(slot)

    if lanes == 1:
        lane(0)
    else:

        def threaded(i):
            try:
                lane(i)
            except BaseException as exc:  # handed to the caller's thread below
                results[i] = exc
            finally:
                connection.close()  # this thread's own connection

        threads = [
            threading.Thread(target=threaded, args=(i,), name=f"embedding-lane-{i}") for i in range(lanes)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if timings is not None:
        for step in steps:
            timings.add(step)
    done: dict = {kind.name: 0 for kind in selected}
    for result in results:
        if isinstance(result, BaseException):
            raise result
        for key, value in result.items():
            if key == "error":
                done["error"] = value
            else:
                done[key] = done.get(key, 0) + value
    return done


def _drain(
    kinds: list[Kind],
    model: str,
    deadline: float,
    batch: int,
    embedder,
    progress,
    linger: float = 0.0,
    timings: Timings | None = None,
) -> dict:
    """Embed batch after batch, kind after kind, and pass over the kinds again as long as a pass
    found work: rows that arrived meanwhile (behind a kind already drained) start at once instead
    of waiting for the next run. With `linger`, an idle drain keeps looking for new rows that
    long before it ends."""
    done: dict = {kind.name: 0 for kind in kinds}
    idle_since = None
    while time.monotonic() < deadline:
        found = 0
        for kind in kinds:
            after = 0
            while time.monotonic() < deadline:
                try:
                    count, last = embed_batch(kind, model, after, batch, embedder, deadline, timings)
                except embeddings.EmbeddingError as exc:
                    log.warning("embedding backlog stopped: %s", exc)
                    return {**done, "error": str(exc)}
                if last == after:
                    break
                done[kind.name] += count
                found += count
                after = last
                if progress and count:
                    progress(kind.name, count)
        if found:
            idle_since = None
            continue
        idle_since = idle_since or time.monotonic()
        if time.monotonic() - idle_since >= linger:
            break
        time.sleep(LINGER_POLL_SECONDS)
    return done
