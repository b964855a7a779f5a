"""The model alone, for the backlog figures: the texts/s the backlog's own lanes (one shared
session per process, one lane per core; knowledge.embeddings.embedder.lane_embedders) reach on
the very texts the backlog embeds, with no database. The backlog's rate is judged against it:
the same texts, because a chat message is embedded after the turn before it and runs two to
three times the tokens of a short memory."""

import os
import threading
import time

from django.db import connection

from knowledge.embeddings import embedder as embeddings
from knowledge.embeddings.backlog import BACKLOG, BATCH, CHUNK, backlog_counts, embedding_text


def backlog_texts(limit: int) -> list[str]:
    """The embedding texts of up to `limit` rows now in the backlog, each kind in proportion."""
    model = embeddings.model_name()
    rows = []
    counts = backlog_counts()
    total = sum(counts.values()) or 1
    with connection.cursor() as cursor:
        for kind in BACKLOG:
            count = counts[kind.name]
            cursor.execute(
                f"SELECT {kind.select} FROM {kind.table} t {kind.join} {kind.vector_join} "
                f"WHERE ({kind.where}) AND ({kind.current_sql}) IS NOT TRUE ORDER BY random() LIMIT %s",
                [kind.model_for(model), round(limit * count / total)],
            )
            rows += [embedding_text(kind.name, row) for row in cursor.fetchall()]
    return rows


def model_alone(texts: list[str]) -> float:
    """Texts/s of the backlog's lanes on `texts`, with no database: each lane takes batches of
    BATCH texts, sorted by length and embedded CHUNK at a time, as embed_batch does."""
    lanes = embeddings.lane_embedders(os.cpu_count() or 1)
    parts = [texts[i :: len(lanes)] for i in range(len(lanes))]

    def run(embedder, part):
        for start in range(0, len(part), BATCH):
            batch = sorted(part[start : start + BATCH], key=len)
            for chunk in range(0, len(batch), CHUNK):
                embeddings.embed_texts(batch[chunk : chunk + CHUNK], embedder)

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(e, p)) for e, p in zip(lanes, parts, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(texts) / (time.perf_counter() - started)
