"""Exact keyword statistics of the searchable corpora (knowledge.TermStat, kept by triggers on
every write): documents per lexeme, and each corpus's document count and average length."""

from dataclasses import dataclass

from django.db import connection, transaction


@dataclass(frozen=True)
class CorpusStats:
    docs: int  # documents in the corpus
    avg_length: float  # their mean length, in distinct lexemes
    containing: dict[str, int]  # lexeme -> documents containing it (only lexemes asked for)


def term_stats(corpora: list[str], lexemes: list[str]) -> dict[str, CorpusStats]:
    """The statistics of `lexemes` in each corpus, in one query (sums over the change rows)."""
    wanted = sorted(set(lexemes) | {""})
    totals: dict[str, dict[str, tuple[int, int]]] = {c: {} for c in corpora}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT corpus, lexeme, sum(docs), sum(length) FROM knowledge_termstat "
            "WHERE corpus = ANY(%s) AND lexeme = ANY(%s) GROUP BY corpus, lexeme",
            [list(corpora), wanted],
        )
        for corpus, lexeme, docs, length in cursor.fetchall():
            totals[corpus][lexeme] = (int(docs), int(length))
    out = {}
    for corpus, rows in totals.items():
        docs, length = rows.pop("", (0, 0))
        out[corpus] = CorpusStats(
            docs=max(docs, 0),
            avg_length=(length / docs) if docs > 0 else 1.0,
            containing={lx: d for lx, (d, _) in rows.items() if d > 0},
        )
    return out


def term_stats_compact() -> int:
    """Fold the change rows into one row per (corpus, lexeme), dropping lexemes no document holds
    any more. Every sum stays what it was, so rankings do not move; rows appended meanwhile by
    concurrent writers are left for the next run. Returns the rows left."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "WITH gone AS (DELETE FROM knowledge_termstat RETURNING corpus, lexeme, docs, length) "
            "INSERT INTO knowledge_termstat (corpus, lexeme, docs, length) "
            "SELECT corpus, lexeme, sum(docs), sum(length) FROM gone GROUP BY corpus, lexeme "
            "HAVING sum(docs) <> 0 OR sum(length) <> 0"
        )
        return cursor.rowcount


def term_stats_fold(lexemes: list[str]) -> None:
    """Fold the change rows of `lexemes` only (term_stats_compact for a few words), in the
    caller's transaction: an erasure leaves no row naming a word only erased text held."""
    if not lexemes:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH gone AS (DELETE FROM knowledge_termstat WHERE lexeme = ANY(%s) "
            "RETURNING corpus, lexeme, docs, length) "
            "INSERT INTO knowledge_termstat (corpus, lexeme, docs, length) "
            "SELECT corpus, lexeme, sum(docs), sum(length) FROM gone GROUP BY corpus, lexeme "
            "HAVING sum(docs) <> 0 OR sum(length) <> 0",
            [sorted(set(lexemes) - {""})],
        )
