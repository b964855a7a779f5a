"""Vectors and the embedding backlog: every memory (loose or entry block), message and episode
without a vector from the current model gets one, in the worker, in batches.

What counts as backlog is defined once here (`BACKLOG`) and reported by `backlog_counts()` and
`coverage()` (GET /api/status); the worker drains it through
knowledge.embeddings.tasks.embedding_backlog_run. It lives in `knowledge` so status (curation),
the ingestion that queues the job and the job itself read one definition. Work is claimed with `SELECT … FOR UPDATE SKIP LOCKED`, so
several workers share it without overlap; each batch's vectors are written by one UPDATE that
also checks the row still lacks a current vector. A memory whose text changes meanwhile is
row-locked by its writer (memory_row_revise clears the vector), so a stale vector is never
written over new text. A worker drains the backlog in lanes (`BRAIN_EMBEDDING_LANES`, one per
core by default): threads with their own connection and model session, so one lane's SQL runs
while another's model does; SKIP LOCKED keeps them apart as it does separate workers."""

import logging
import os
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

from knowledge.embeddings import embedder as embeddings
from knowledge.models import Episode, Memory, Message, MessageVector

log = logging.getLogger(__name__)

BATCH = 256
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
    Kind("episodes", Episode._meta.db_table, "t.id, t.topic, t.summary, t.likely_question, t.resolution"),
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


def embed_batch(kind: Kind, model: str, after_id: int, batch: int = BATCH, embedder=None) -> tuple[int, int]:
    """Claim, embed and store one batch of `kind` with ids above `after_id`, `model` being the
    embedder's name (Kind.model_for names the vectors). Returns (rows embedded, last id seen);
    (0, after_id) when nothing is left."""
    model = kind.model_for(model)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {kind.select} FROM {kind.table} t {kind.join} {kind.vector_join} "
            f"WHERE t.id > %s AND ({kind.where}) AND ({kind.current_sql}) IS NOT TRUE "
            f"ORDER BY t.id LIMIT %s FOR UPDATE OF t SKIP LOCKED",
            [after_id, model, batch],
        )
        rows = cursor.fetchall()
        if not rows:
            return 0, after_id
        vectors = embeddings.embed_texts([embedding_text(kind.name, r) for r in rows], embedder)
        ids, literals = [r[0] for r in rows], [_vector_sql(v) for v in vectors]
        if kind.side_table:
            cursor.execute(
                f"INSERT INTO {kind.side_table} AS v (message_id, model, embedding) "
                f"SELECT d.id, %s, d.v::vector FROM unnest(%s::bigint[], %s::text[]) AS d(id, v) "
                f"ON CONFLICT (message_id) DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding "
                f"WHERE v.model <> EXCLUDED.model",
                [model, ids, literals],
            )
        else:
            cursor.execute(
                f"UPDATE {kind.table} t SET embedding = d.v::vector, embedding_model = %s "
                f"FROM unnest(%s::bigint[], %s::text[]) AS d(id, v) "
                f"WHERE t.id = d.id AND t.embedding_model <> %s",
                [model, ids, literals, model],
            )
        return cursor.rowcount, rows[-1][0]


def run_backlog(
    *,
    max_seconds: float = 50.0,
    batch: int = BATCH,
    kinds=None,
    lanes: int | None = None,
    progress=None,
    linger_seconds: float = 0.0,
) -> dict:
    """Embed backlog rows until none is left (and none arrived for `linger_seconds`) or
    `max_seconds` pass, in `lanes` threads (default BRAIN_EMBEDDING_LANES; 0: one per core).
    `progress(kind, count)` is called after every stored batch, from the lane's thread. Returns
    counts per kind and, when the embedder failed, why."""
    if not embeddings.enabled():
        return {"skipped": "embeddings are off (BRAIN_EMBEDDINGS=none)"}
    model = embeddings.model_name()
    deadline = time.monotonic() + max_seconds
    selected = [kind for kind in BACKLOG if not kinds or kind.name in kinds]
    lanes = lanes if lanes is not None else settings.BRAIN_EMBEDDING_LANES
    lanes = max(1, lanes or os.cpu_count() or 1)
    try:
        embedders = embeddings.lane_embedders(lanes) if lanes > 1 else [None]
    except embeddings.EmbeddingError as exc:
        log.warning("embedding backlog stopped: %s", exc)
        return {"error": str(exc)}
    if len(embedders) == 1:
        return _drain(selected, model, deadline, batch, embedders[0], progress, linger_seconds)
    results: list = [None] * len(embedders)

    def lane(i):
        try:
            results[i] = _drain(selected, model, deadline, batch, embedders[i], progress, linger_seconds)
        except BaseException as exc:  # handed to the caller's thread below
            results[i] = exc
        finally:
            connection.close()  # this thread's own connection

    threads = [
        threading.Thread(target=lane, args=(i,), name=f"embedding-lane-{i}") for i in range(len(embedders))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done: dict = {kind.name: 0 for kind in selected}
    for result in results:
        if isinstance(result, BaseException):
            raise result
        for key, value in result.items():
            if key == "error":
                done["error"] = value
            else:
                done[key] += value
    return done


def _drain(
    kinds: list[Kind], model: str, deadline: float, batch: int, embedder, progress, linger: float = 0.0
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
                    count, last = embed_batch(kind, model, after, batch, embedder)
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
