"""Ranked entry search: PostgreSQL full-text search plus trigram matching of names and aliases,
without the pg_trgm extension (the embedded server ships none).

* Full text: `EntrySearch.document` (trigger-maintained; name and aliases weight A, summary B,
  body blocks C; GIN index) finds the matches; every query word must match, the last one as a
  prefix. Ranking reads only the entry row: `ts_rank` over `head_vector` (name, aliases,
  summary) plus a constant for a match anywhere, so a word found in thousands of bodies costs
  no document reads; among equal scores the most recently changed entry comes first.
* Trigrams: `name_trigrams` holds the trigram set of the entry's name and aliases as codes (three
  code points packed into a bigint — exact, and far faster to compare than text; GIN index),
  made by the SQL function `brain_trigram_codes`, which also cuts up the query — one definition. An
  entry matches when it holds at least TRIGRAM_MATCH of the query's trigrams and at least
  WORD_MATCH of each query word's, so a partial or misspelt name or alias still finds it while
  an entry sharing one common word with a two-word query does not.
* Candidates come from the GIN index without losing matches: an entry holding k of a set's n
  trigrams holds at least one of any n - k + 1 of them (pigeonhole), so each condition becomes
  "overlaps the n - k + 1 rarest" (rarity from the planner's element statistics), and the
  conditions are ANDed. Only those candidates are counted exactly.
* Score: head text rank (+ BODY_MATCH for any text match) + the share of the query's trigrams
  found + half the share of the entry's own trigrams matched (the closest name wins)."""

import dataclasses
import math

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connection

from knowledge.models import Entry

TRIGRAM_MATCH = 0.6
WORD_MATCH = 0.34
MAX_WORDS = 6
BODY_MATCH = 0.1  # what a text match adds on top of the name/alias/summary rank


def tsquery_text(words: list[str]) -> str:
    """A to_tsquery string: every word must match, the last one as a prefix (results while
    typing). The words come from the trigram splitter: letters and digits only."""
    if not words:
        return ""
    return " & ".join([*words[:-1], words[-1] + ":*"])


@dataclasses.dataclass
class TrigramQuery:
    words: list[str]
    all: list[int]  # the query's trigram codes
    need: int  # how many of them an entry must hold
    per_word: list[tuple[list[int], int]]  # each word's trigram codes and how many it needs
    filters: list[list[int]]  # GIN conditions: the entry must overlap each of these sets


def trigram_query(q: str) -> TrigramQuery:
    """Cut `q` into words and trigram codes in SQL (the same functions that fill name_trigrams),
    with each trigram's share of entries from the planner statistics (0 when rare or unknown)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH words AS (
              SELECT word, min(ord) AS ord
                FROM regexp_split_to_table(lower(%s), '[^[:alnum:]]+') WITH ORDINALITY AS w(word, ord)
               WHERE word <> '' GROUP BY word
            ), stats AS (
              SELECT unnest(most_common_elems::text::bigint[]) AS elem, unnest(most_common_elem_freqs) AS freq
                FROM pg_stats
               WHERE schemaname = current_schema() AND tablename = %s AND attname = 'name_trigrams'
            )
            SELECT words.word, t.code, coalesce(stats.freq, 0)
              FROM words CROSS JOIN LATERAL unnest(brain_trigram_codes(words.word)) AS t(code)
              LEFT JOIN stats ON stats.elem = t.code
             ORDER BY words.ord, t.code
            """,
            [q[:300], Entry._meta.db_table],
        )
        rows = cursor.fetchall()
    freq, by_word = {}, {}
    for word, code, share in rows:
        freq[code] = float(share)
        by_word.setdefault(word, []).append(code)
    words = list(by_word)[:MAX_WORDS]
    codes = sorted({c for w in words for c in by_word[w]})
    if not codes:
        return TrigramQuery(words, [], 0, [], [])

    def rarest(items, k):
        return sorted(items, key=lambda c: (freq[c], c))[: len(items) - k + 1]

    need = max(1, math.ceil(TRIGRAM_MATCH * len(codes)))
    per_word = [(by_word[w], max(1, math.ceil(WORD_MATCH * len(by_word[w])))) for w in words]
    filters = [rarest(codes, need)] + ([rarest(c, k) for c, k in per_word] if len(words) > 1 else [])
    return TrigramQuery(words, codes, need, per_word, filters)


def ranked_ids(qs, q: str, *, limit: int, offset: int) -> tuple[list[int], int]:
    """(one page of ids, total matches) of the entries in `qs` (a filtered Entry queryset without
    joins) that match `q`, best first."""
    tq = trigram_query(q)
    tsq = tsquery_text(tq.words)
    if not tsq:
        return [], 0
    try:
        where_sql, where_params = qs.query.get_compiler(connection=connection).compile(qs.query.where)
    except EmptyResultSet:
        return [], 0
    except FullResultSet:
        where_sql, where_params = "", []
    t = Entry._meta.db_table
    candidates = " AND ".join(f"{t}.name_trigrams && %s::bigint[]" for _ in tq.filters) or "false"

    def held(codes):  # how many of `codes` the entry holds
        return " + ".join(f"({code}::bigint = ANY({t}.name_trigrams))::int" for code in codes) or "0"

    counts = ", ".join(
        [f"{held(tq.all)} AS hits"] + [f"{held(codes)} AS w{i}" for i, (codes, _) in enumerate(tq.per_word)]
    )
    hit_columns = ", ".join(
        ["coalesce(h.hits, 0) AS hits"] + [f"coalesce(h.w{i}, 0) AS w{i}" for i in range(len(tq.per_word))]
    )
    word_ok = " AND ".join(f"c.w{i} >= %s" for i in range(len(tq.per_word))) or "true"
    name_match = f"(c.hits >= %s AND {word_ok})"
    # One pass over the entries: those the text index found (by id) or the trigram index found.
    sql = f"""
        WITH fts AS MATERIALIZED (
          SELECT entry_id FROM knowledge_entrysearch WHERE document @@ to_tsquery('english', %s)
        ), c AS MATERIALIZED (
          SELECT {t}.id, {t}.updated_at, fts.entry_id IS NOT NULL AS fts_match,
                 CASE WHEN fts.entry_id IS NOT NULL
                      THEN ts_rank({t}.head_vector, to_tsquery('english', %s)) + %s ELSE 0 END AS fts,
                 greatest(cardinality({t}.name_trigrams), 1) AS n,
                 {hit_columns}
            FROM {t}
            LEFT JOIN fts ON fts.entry_id = {t}.id
            LEFT JOIN LATERAL (SELECT {counts} WHERE {candidates}) AS h ON true
           WHERE ({where_sql or "true"})
             AND ({t}.id = ANY(ARRAY(SELECT entry_id FROM fts)) OR ({candidates}))
        )
        SELECT c.id, count(*) OVER () AS total FROM c
         WHERE c.fts_match OR {name_match}
         ORDER BY (CASE WHEN {name_match} THEN c.hits::float / %s + 0.5 * c.hits::float / c.n ELSE 0 END)
                  + c.fts DESC, c.updated_at DESC, c.id
         LIMIT %s OFFSET %s
    """
    word_needs = [k for _, k in tq.per_word]
    params = [
        tsq,
        tsq,
        BODY_MATCH,
        *tq.filters,
        *where_params,
        *tq.filters,
        tq.need,
        *word_needs,
        tq.need,
        *word_needs,
        max(1, len(tq.all)),
        limit,
        offset,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [r[0] for r in rows], (rows[0][1] if rows else 0)
