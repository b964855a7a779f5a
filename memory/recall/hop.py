"""The second hop of memory_search (multi-hop recall): the words the best first hits use that the
question does not.

A question names one side of what it asks about ("What does Jon plan for the grand opening?")
while the turns that answer it often say it in other words, which the first hits use.
Relevance feedback bridges that: the lexemes of the best `hop_hits` candidates of the first
ranking (messages, memories and entries alike), each weighed by the fused scores of the
candidates holding it times its rarity (idf), give the `hop_terms` best new terms; the message
keyword route runs once more over the question's own terms plus those, and its ranking
(HOP_MESSAGES) joins fusion with `hop_weight`. The four routes' own rankings are unchanged; a
question whose first hits name nothing new gets no second hop.

Only messages are searched again. A second hop over memories and entries (the knowledge keyword
route) was measured and left out: it moved no question of the LoCoMo dev split and one of our
own set's 58 either way (fused any@5 and any@10 one question up without it, session@5 one
down), while its two statements were two thirds of the hop's database time (same run,
alternating, 100k bench world: the hop 6.3–7.3 → 2.6–2.8 ms, and up to 5.8 ms less database
CPU per search; docs/perf-notes/2026-12-02-recall.md,
"the second hop searches messages only").

A hit's lexemes are those of its stored tsvector (what the keyword routes match), leaving out
the question's own, numbers, and the name of a message's speaker (every turn names its speaker:
it says nothing about the topic). Two round trips: the lexemes with their statistics, then the
keyword statement."""

from dataclasses import dataclass, replace

from knowledge.models import Message
from memory.recall import fts
from memory.recall import routes as R
from memory.recall.fuse import Candidate
from memory.recall.params import HOP_MESSAGES, RecallParams
from memory.recall.scope import NothingVisible
from memory.recall.terms import Weighed, bm25_idf, counted_term

# The first-hop kinds whose rows carry a tsvector; an episode lends its best message hit's.
_LEXEMES = {
    R.MESSAGE: (
        f"SELECT x.lexeme, h.w FROM h JOIN knowledge_message m ON h.kind = 'message' AND m.id = h.id "
        f"CROSS JOIN LATERAL unnest({fts.message_tsv('m')}) x WHERE x.lexeme <> ALL("
        f"tsvector_to_array(to_tsvector('{fts.CONFIG}'::regconfig, m.speaker_name)))"
    ),
    R.MEMORY: (
        f"SELECT x.lexeme, h.w FROM h JOIN knowledge_memory y ON h.kind = 'memory' AND y.id = h.id "
        f"CROSS JOIN LATERAL unnest({fts.memory_tsv('y')}) x"
    ),
    R.ENTRY: (
        f"SELECT x.lexeme, h.w FROM h JOIN knowledge_entry e ON h.kind = 'entry' AND e.id = h.id "
        f"CROSS JOIN LATERAL unnest({fts.entry_tsv('e')}) x"
    ),
}


# Only the new terms select the second hop's candidates (rows holding none of them were the first
# hop's to find), and only while the documents they select add up to HOP_CANDIDATE_DOCS: a word
# hundreds of documents use bridges to nothing in particular. The question's terms score them.
HOP_CANDIDATE_DOCS = 500


@dataclass
class Hop:
    """What the second hop found: its two rankings (none when it did not run: `reason` says why)."""

    rankings: dict
    reason: str = ""


def feedback_hits(candidates: list[Candidate], n: int) -> list[tuple[str, int, float]]:
    """(kind, id, weight) of the best `n` candidates that have lexemes: messages, memories and
    entries as themselves, an episode through its best message hit; weight is the fused score."""
    hits = []
    for cand in candidates[:n]:
        if cand.kind == R.EPISODE:
            if cand.hits:
                hits.append((R.MESSAGE, cand.hit_ids()[0], cand.fused))
        else:
            hits.append((cand.kind, cand.id, cand.fused))
    return hits


def _lexemes_sql(hits, query_lexemes: list[str]) -> tuple[str, list]:
    """(lexeme, its weight, corpus, documents of that corpus holding it) for every new lexeme of
    the hits, one row per corpus that holds it. The hits are candidates of the search's own
    routes, so only rows inside its scope lend their words."""
    kinds, ids, weights = zip(*hits, strict=True)
    arms = " UNION ALL ".join(_LEXEMES[kind] for kind in sorted(set(kinds)))
    sql = (
        "WITH h(kind, id, w) AS (SELECT * FROM unnest(%s::text[], %s::bigint[], %s::float8[])), "
        f"lx AS ({arms}), "
        "n AS (SELECT lexeme, sum(w) AS w FROM lx WHERE lexeme <> ALL(%s::text[]) "
        "AND lexeme !~ '^[0-9]+$' GROUP BY lexeme) "
        "SELECT n.lexeme, n.w, t.corpus, sum(t.docs) FROM n JOIN knowledge_termstat t "
        "ON t.lexeme = n.lexeme AND t.corpus = ANY(%s) GROUP BY n.lexeme, n.w, t.corpus"
    )
    return sql, [list(kinds), list(ids), list(weights), list(query_lexemes), [c.name for c in R.CORPORA]]


def choose_terms(rows, weighed: dict[str, Weighed], count: int) -> dict[str, Weighed]:
    """The `count` lexemes of `rows` (from _lexemes_sql) with the highest weight × idf (idf over
    all corpora together), added to each corpus's terms where that corpus holds them."""
    held: dict[str, dict[str, int]] = {}
    weight: dict[str, float] = {}
    for lexeme, w, corpus, docs in rows:
        if int(docs) > 0:
            held.setdefault(lexeme, {})[corpus] = int(docs)
            weight[lexeme] = float(w)
    total = sum(w.docs for w in weighed.values())
    ranked = sorted(held, key=lambda lx: (-weight[lx] * bm25_idf(total, sum(held[lx].values())), lx))
    chosen = ranked[:count]
    out = {}
    for corpus, w in weighed.items():
        added = [counted_term(lx, n, w.docs) for lx in chosen if (n := held[lx].get(corpus, 0)) > 0]
        out[corpus] = Weighed(
            w.terms + added,
            w.avg_length,
            w.docs,
            select=frozenset(t.lexeme for t in added),
            candidate_docs=HOP_CANDIDATE_DOCS,
            strict=True,
        )
    return out


def second_hop(inp: R.RouteInput, candidates: list[Candidate], params: RecallParams, settings_sql: str):
    """Run the second hop for the first ranking `candidates` (see the module docstring)."""
    try:
        inp.scope.where(Message)
    except NothingVisible:  # e.g. the eval gate's store scope of an agent in no channel
        return Hop({}, reason="no messages in this scope")
    hits = feedback_hits(candidates, params.hop_hits)
    if not hits:
        return Hop({}, reason="no first hits to learn from")
    (rows,) = R.execute_all([_lexemes_sql(hits, inp.lexemes)])
    first = {c.name: inp.terms(c.name) for c in R.CORPORA}
    expanded = choose_terms(rows, first, params.hop_terms)
    if not expanded["message"].select:
        return Hop({}, reason="the first hits name nothing new")
    hinp = replace(inp, _terms=expanded)  # only the message route reads them
    rankings, _ = R.run_batched({HOP_MESSAGES: R.keyword_messages(hinp)}, settings_sql)
    return Hop(rankings)
