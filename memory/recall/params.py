"""The knobs of memory_search, in one place. The defaults were chosen by measurement on the
public LoCoMo dev split, checked on the labelled set in bench/data/recall_eval.json
(`python -m bench recall_quality`); docs/RECALL.md records the runs that chose them. Change them
only with a new measurement."""

from dataclasses import dataclass, field, replace

KEYWORD_KNOWLEDGE = "keyword_knowledge"
VECTOR_KNOWLEDGE = "vector_knowledge"
KEYWORD_MESSAGES = "keyword_messages"
VECTOR_EPISODES = "vector_episodes"  # episode summaries, plus messages no episode covers yet
ROUTES = (KEYWORD_KNOWLEDGE, VECTOR_KNOWLEDGE, KEYWORD_MESSAGES, VECTOR_EPISODES)
VECTOR_ROUTES = (VECTOR_KNOWLEDGE, VECTOR_EPISODES)
# The second hop's ranking (memory.recall.hop): the message keyword route once more, over the
# question's terms plus the new terms of the first hits.
HOP_MESSAGES = "second_hop_messages"
HOP_ROUTES = (HOP_MESSAGES,)


@dataclass(frozen=True)
class RecallParams:
    # Fusion (memory.recall.fuse.Fusion): "wsum", a weighted sum of min-max normalised route
    # scores, or "rrf", weighted reciprocal-rank fusion: sum over routes of weight / (rrf_k + rank).
    fusion: str = "wsum"
    # How "wsum" normalises a route's scores: "max" (score / the route's best) or "minmax".
    normalise: str = "max"
    rrf_k: int = 20
    weights: dict = field(
        default_factory=lambda: {
            KEYWORD_KNOWLEDGE: 1.5,
            VECTOR_KNOWLEDGE: 1.0,
            KEYWORD_MESSAGES: 1.5,
            VECTOR_EPISODES: 1.0,
        }
    )
    # Each hit's contribution is multiplied by its match quality (0..1) to this power; 0 is
    # plain RRF. Vector hits below min_similarity (cosine) are dropped from fusion.
    quality_exponent: float = 1.0
    min_similarity: float = 0.2
    # A message hit covered by an episode counts towards the episode (fuse): "best" (per route,
    # the episode's best message hit), "sum" (all of them), or "apart" (messages stay candidates
    # of their own).
    episode_hits: str = "sum"
    # A memory winner shows up to this many of its linked neighbours (the reconciler's links, in
    # the reader's scope, active ones) inside its own item and cap; 0 is off. Off by default: on
    # the reconciler's labelled pairs plain ranking already put every paraphrase in the top 2, so
    # pulling a link in found nothing new (docs/PERFORMANCE.md, "The reconciler").
    link_neighbours: int = 0
    # The second hop (memory.recall.hop): the lexemes of the best `hop_hits` first candidates give
    # `hop_terms` new terms; the keyword routes run again with them and their rankings are fused
    # with `hop_weight` (0 is off: no second hop runs). Relevance feedback's usual sizes, not
    # fitted; cross-validated on the LoCoMo dev split (docs/RECALL.md).
    hop_hits: int = 3
    hop_terms: int = 4
    hop_weight: float = 0.5
    # Candidates each route contributes (at least; a larger k asks for more).
    route_limit: int = 50
    # Temporal decay. Messages, episodes and short-term memories lose half their score every
    # `message_half_life_days` (no floor: age counts fully, but four years to halve, so a question
    # about a conversation's first weeks still finds them); knowledge (semantic and procedural memories, entries) loses at
    # most (1 - knowledge_floor), with its own half-life, so it never vanishes for not being edited.
    message_half_life_days: float = 1460.0
    knowledge_half_life_days: float = 180.0
    knowledge_floor: float = 0.8
    # A memory whose validity has ended (valid_to in the past) is history: it ranks below current
    # knowledge by this factor but stays findable.
    history_factor: float = 0.5
    # Support between conversation hits close in time (fuse.add_support): a hit gains
    # neighbour_weight × the fused scores of the hits up to neighbour_seconds before it,
    # neighbour_after_weight × those as far after it, and burst_weight × the best fused score
    # of another hit within burst_seconds. A weight of 0 is off.
    neighbour_seconds: float = 120.0
    neighbour_weight: float = 0.2
    neighbour_after_weight: float = 0.1
    burst_seconds: float = 1800.0
    burst_weight: float = 0.1
    # A query that names a time (memory.recall.when): conversation hits inside it (widened by
    # when_slack_days) score × (1 + when_boost). 0 is off.
    when_boost: float = 1.0
    when_slack_days: float = 1.0
    # A message said by a speaker the query names (fuse.speaker_factor) scores × (1 +
    # speaker_boost). 0 is off. Cross-validated on the LoCoMo dev split (each fold chose 0.5 or
    # 1.0; returned any@1 .464 → .521, any@10 .837 → .872; docs/RECALL.md).
    speaker_boost: float = 1.0
    # Expansion: a lone message brings this many neighbours on each side; a thread at most
    # thread_messages messages (those nearest the hit first); an episode its first messages.
    nearby_messages: int = 2
    thread_messages: int = 12
    episode_messages: int = 8
    # Per-candidate cap: no result may take more than this share of the budget (nor less than
    # min_item_tokens, so a tiny budget still shows whole short results).
    item_share: float = 0.25
    min_item_tokens: int = 64
    # HNSW search width; iterative scans (relaxed order) continue until the filtered query has
    # its rows.
    ef_search: int = 100
    # Candidates handed to an optional reranker.
    rerank_top: int = 30
    # Where relevance ends: a result scoring below this share of the best candidate's score is
    # left out of search results and the compiled context (which say how many), whatever budget
    # is left. Chosen by leave-one-conversation-out over the LoCoMo dev split, the own set and the
    # chat set together, as the largest floor whose any@10 stays within .002 of no floor: 0.15 in
    # all but one fold (`python -m bench recall_floor`, docs/PERFORMANCE.md). 0.1 is kept, one step
    # below: an episode's summed message hits can make the best score large, and at 0.15 a
    # relevant memory beside it fell under the floor (test_context_memo_status).
    relevance_floor: float = 0.1

    def with_weights(self, **weights) -> "RecallParams":
        return replace(self, weights={**self.weights, **weights})


DEFAULT_PARAMS = RecallParams()
