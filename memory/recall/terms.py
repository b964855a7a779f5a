"""Keyword scoring: which terms of a query matter, and how much.

PostgreSQL's ts_rank knows nothing about how rare a word is, so "how do I fix E4012 on the VPN"
would rank a hundred VPN messages above the one naming E4012. We score with BM25 instead: each
query lexeme weighs its inverse document frequency, its count in the document saturates (k1)
and long documents are normalised to the corpus's average length (b). Document frequencies,
document counts and lengths are exact: knowledge.termstats keeps them on every write, so the
same query on the same data always ranks the same."""

import math
from dataclasses import dataclass

from knowledge.replica import read_connection
from knowledge.termstats import CorpusStats, term_stats

# BM25: term-frequency saturation k1 as usual; length normalisation b weaker than the usual 0.75,
# because chat messages are short and a long one is not less about its words (measured on the
# LoCoMo dev split, keyword route alone, any@1 / any@10: b 0.75 .369 / .696, b 0.5 .377 / .709,
# b 0.25 .382 / .717, b 0 .406 / .717; k1 0.8 or 2.0 within a question or two of 1.2).
BM25_K1 = 1.2
BM25_B = 0.25
# The index scan that selects candidates uses the rarest lexemes whose documents add up to at most
# CANDIDATE_DOCS; commoner lexemes only score. A document that matches nothing but common words
# would rank low anyway, and this bounds the rows a search reads. When even the rarest lexeme is
# in more documents than that (a large corpus: at a million messages most words are), the rarest
# lexemes select together instead (candidate_selection).
CANDIDATE_DOCS = 2000
# A lexeme in more than this share of a corpus (and in more than CANDIDATE_DOCS documents) does
# not select candidates at all: it tells too little. A query made only of such words finds
# nothing by keyword there (the vector routes still answer it).
MAX_CANDIDATE_SHARE = 0.05


@dataclass
class Term:
    lexeme: str
    idf: float
    share: float  # estimated share of documents containing it
    docs: float = 0.0  # estimated number of documents containing it

    @property
    def tsquery(self) -> str:
        return quote_lexeme(self.lexeme)


def quote_lexeme(lexeme: str) -> str:
    """A tsquery literal matching exactly this (already normalised) lexeme."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def query_lexemes(q: str) -> list[str]:
    """The normalised lexemes of a query, in the english configuration the indexes use (stop
    words dropped, words stemmed; "ERR-4012" gives err-4012, err and 4012)."""
    if not q.strip():
        return []
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(array_agg(lexeme), '{}') FROM unnest(to_tsvector('english'::regconfig, %s))",
            [q[:2000]],
        )
        return list(cursor.fetchone()[0])


def bm25_idf(docs: float, containing: float) -> float:
    containing = min(max(containing, 0.0), docs)
    return math.log(1 + (docs - containing + 0.5) / (containing + 0.5))


def counted_term(lexeme: str, containing: int, docs: int) -> Term:
    """A lexeme found in `containing` of a corpus's `docs` documents, with its idf and share."""
    docs = max(docs, 1)
    return Term(lexeme=lexeme, idf=bm25_idf(docs, containing), share=containing / docs, docs=containing)


@dataclass(frozen=True)
class Corpus:
    """A keyword-searchable table: its name in knowledge.TermStat and its tsvector expression
    (on the bare table name)."""

    name: str
    rows_table: str
    tsv_sql: str


@dataclass
class Weighed:
    """A query's terms in one corpus, and the corpus's average document length. `select`, when
    given, names the only lexemes that may select candidates (the others only score), and
    `candidate_docs` bounds the documents they select (see candidate_terms). `strict`: no term is
    sure to select, not even the rarest when it alone is over the bound (a second hop's new
    terms: a common one would only add rows to read)."""

    terms: list[Term]
    avg_length: float = 1.0
    docs: int = 0  # documents in the corpus
    select: frozenset | None = None
    candidate_docs: int = CANDIDATE_DOCS
    strict: bool = False


def weigh_terms(lexemes: list[str], corpora: list[Corpus], stats=None) -> dict[str, Weighed]:
    """Each lexeme with its idf in each corpus (lexemes that occur nowhere in a corpus are
    dropped from it), from exact statistics (knowledge.termstats, read in one round trip unless
    `stats` are given)."""
    if not lexemes:
        return {c.name: Weighed([]) for c in corpora}
    stats = stats or term_stats([c.name for c in corpora], lexemes)
    out = {}
    for c in corpora:
        st = stats[c.name]
        terms = [counted_term(lx, n, st.docs) for lx in lexemes if (n := st.containing.get(lx, 0)) > 0]
        out[c.name] = Weighed(terms, st.avg_length, st.docs)
    return out


def weigh_query(q: str, corpora: list[Corpus]) -> tuple[list[str], dict[str, Weighed]]:
    """query_lexemes and weigh_terms in one round trip: the query's lexemes and their
    statistics (the sums knowledge.termstats.term_stats reads, the corpus totals under the
    lexeme '') come from one statement."""
    if not q.strip():
        return [], weigh_terms([], corpora)
    names = [c.name for c in corpora]
    with read_connection().cursor() as cursor:
        cursor.execute(
            "WITH q AS (SELECT coalesce(array_agg(lexeme), '{}') AS lexemes "
            "FROM unnest(to_tsvector('english'::regconfig, %s))) "
            "SELECT NULL::text, NULL::text, NULL::numeric, NULL::numeric, q.lexemes FROM q UNION ALL "
            "SELECT t.corpus, t.lexeme, sum(t.docs), sum(t.length), NULL FROM knowledge_termstat t, q "
            "WHERE t.corpus = ANY(%s) AND t.lexeme = ANY(q.lexemes || ''::text) GROUP BY t.corpus, t.lexeme",
            [q[:2000], names],
        )
        rows = cursor.fetchall()
    lexemes: list[str] = []
    totals: dict[str, dict[str, tuple[int, int]]] = {name: {} for name in names}
    for corpus, lexeme, docs, length, found in rows:
        if corpus is None:
            lexemes = list(found)
        else:
            totals[corpus][lexeme] = (int(docs), int(length))
    stats = {}
    for corpus, by_lexeme in totals.items():
        docs, length = by_lexeme.pop("", (0, 0))
        stats[corpus] = CorpusStats(
            docs=max(docs, 0),
            avg_length=(length / docs) if docs > 0 else 1.0,
            containing={lx: d for lx, (d, _) in by_lexeme.items() if d > 0},
        )
    return lexemes, weigh_terms(lexemes, corpora, stats)


@dataclass
class Selection:
    """The terms whose index entries select a keyword route's candidates: a row holding any of
    them, or, `together`, a row holding all of them."""

    terms: list[Term]
    together: bool = False

    def __bool__(self) -> bool:
        return bool(self.terms)

    @property
    def tsquery(self) -> str:
        return (" & " if self.together else " | ").join(t.tsquery for t in self.terms)

    @property
    def most(self) -> float:
        """The most documents the selection can hold: the terms' documents added up, or,
        `together`, the rarest's (words of one question often come together: "billing service"
        is in as many messages as "billing")."""
        if not self.terms:
            return 0.0
        if self.together:
            return float(min(t.docs for t in self.terms))
        return float(sum(t.docs for t in self.terms))


def candidate_selection(weighed: Weighed) -> Selection:
    """How a keyword route selects its candidates: the rarest terms, any of them, while their
    documents add up to at most `candidate_docs` (candidate_terms). When the rarest term alone is
    over that bound and the query has other terms (not `strict`), the rarest terms select
    together instead — the rarest, then the next rarest, until the rows expected to hold them all
    (the rarest's documents × the others' shares) fit the bound, or the terms run out. So the rows
    a search reads grow far less with the corpus (at a million messages a search's p95 fell by a
    quarter, docs/PERFORMANCE.md): a row with only the rarest of several common query words ranks
    below the rows with two of them anyway. A one-word query still reads its word's documents, and
    words that always come together more than their shares say."""
    chosen = candidate_terms(weighed)
    bound = weighed.candidate_docs
    if weighed.strict or (chosen and (len(chosen) > 1 or chosen[0].docs <= bound)):
        return Selection(chosen)
    allowed = sorted(
        (t for t in weighed.terms if weighed.select is None or t.lexeme in weighed.select),
        key=lambda t: (t.docs, t.lexeme),
    )
    if len(allowed) < 2:
        return Selection(chosen)
    together, expected = [allowed[0]], allowed[0].docs
    for term in allowed[1:]:
        if expected <= bound:
            break
        together.append(term)
        expected *= term.share
    return Selection(together, together=True)


def candidate_terms(weighed: Weighed) -> list[Term]:
    """The terms whose index entries select candidates: the rarest ones (of those `select`
    allows), while their documents add up to at most `candidate_docs` (at least the rarest term,
    unless `strict`), never one found in more than MAX_CANDIDATE_SHARE of a large corpus. Empty:
    the corpus has no useful candidates for the query."""
    chosen, total = [], 0.0
    bound = weighed.candidate_docs
    allowed = [t for t in weighed.terms if weighed.select is None or t.lexeme in weighed.select]
    for term in sorted(allowed, key=lambda t: t.docs):
        if term.share > MAX_CANDIDATE_SHARE and term.docs > CANDIDATE_DOCS:
            break
        if (chosen or weighed.strict) and total + term.docs > bound:
            break
        chosen.append(term)
        total += term.docs
    return chosen
