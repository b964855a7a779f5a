"""Fusion of the routes, support from nearby hits, temporal decay with the time a query names,
and the optional reranker. `rank` is the whole ranking of route lists that search and the quality
bench share."""

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.utils.module_loading import import_string

from knowledge.models import Memory
from memory.recall.params import HOP_ROUTES, VECTOR_ROUTES, RecallParams
from memory.recall.routes import ENTRY, EPISODE, MEMORY, MESSAGE, RouteHit
from memory.recall.when import Window, query_window

SECONDS_PER_DAY = 86400.0


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _datetime(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


@dataclass
class Candidate:
    kind: str
    id: int
    routes: dict = field(default_factory=dict)  # route -> {"rank": int, "score": float}
    fused: float = 0.0
    decay: float = 1.0
    rerank: float | None = None
    score: float = 0.0
    # as RouteHit.stamp: (time, tier, valid_to, confidence, held)
    stamp: tuple = (None, None, None, None, None)
    obj: object = None  # the row, loaded only for candidates that may be shown
    # An episode's message hits (message id -> {"score": its fused contribution, "routes": …}):
    # a message hit covered by an episode counts towards that episode (see fuse).
    hits: dict = field(default_factory=dict)
    # A memory in a conflict still in force (memory.recall.correct): the ids it conflicts with,
    # and the one-line note recall and the context show with it.
    conflict_with: list = field(default_factory=list)
    conflict_note: str = ""
    speaker: str = ""  # a message's speaker (RouteHit.speaker)

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.id)

    def hit_ids(self) -> list[int]:
        """The message hits this candidate stands for, best first: a message itself, an
        episode's covered messages that a route found."""
        if self.kind == MESSAGE:
            return [self.id]
        return sorted(self.hits, key=lambda m: (-self.hits[m]["score"], m))

    @property
    def time(self) -> datetime | None:
        """A message's time, an episode's end, a memory's or entry's last change."""
        return _datetime(self.stamp[0])

    @property
    def tier(self) -> str | None:
        return self.stamp[1]

    @property
    def valid_to(self) -> datetime | None:
        return _datetime(self.stamp[2])

    @property
    def confidence(self) -> float:
        """How much recall should trust this item, for context compilation: a memory's own
        confidence; curated entries 1.0; raw conversation (messages, episodes) 0.7, because what
        someone said is evidence, not a checked fact."""
        if self.kind == MEMORY:
            return float(self.stamp[3] if self.stamp[3] is not None else 1.0)
        if self.kind == ENTRY:
            return 1.0
        return 0.7

    @classmethod
    def for_memory(cls, memory, **kw) -> "Candidate":
        """A candidate made from a memory row (e.g. one the eval gate forces into context)."""
        stamp = (
            _epoch(memory.updated_at),
            memory.tier,
            _epoch(memory.valid_to),
            memory.confidence,
            _epoch(memory.held_from),
        )
        return cls(kind=MEMORY, id=memory.pk or 0, obj=memory, stamp=stamp, **kw)


class Fusion:
    """The routes' lists fused into candidates one list at a time (`add`), and the ranking of what
    was added so far (`ranked`): the fused scores supported by nearby hits and decayed.

    A candidate's fused score sums, over every route that found it (`params.fusion`):

    - "wsum" (score-aware): weight × the hit's score min–max normalised within its route's list
      × quality^quality_exponent;
    - "rrf" (rank-based): weight × quality^quality_exponent / (rrf_k + rank).

    Quality is how well the hit matches, 0..1 (matched share of the query's idf for keyword
    routes, cosine similarity for vector routes); it damps a route whose best hit is poor.
    Vector hits below `min_similarity` do not take part.

    A message covered by an episode is not a candidate of its own: its hit counts towards the
    episode (which lists it among its `hits` and is expanded around it). Otherwise the keyword
    route's hit lands on the message and the vector route's on its episode, the two never add
    up, and the pair takes two of the k places. `params.episode_hits` says how an episode's
    message hits count within one route: "best" (the best one only: one candidate, one
    contribution per route) or "sum"; "apart" keeps messages as candidates of their own.

    A search ranks twice: after the four routes, and after the second hop's list is added. The
    sums and the decay of what was fused before are kept, so the second ranking adds one list
    instead of fusing all five again, and is the ranking `rank` gives for the five lists at once
    (the sums are taken in the same order; tested). On the inputs of the 382 LoCoMo dev
    questions' rankings, recorded, CPU per search (both rankings, best of 5): 1.83 ms fusing
    everything twice, 1.16 ms so. Same run against main over HTTP, with the context rows' epoch
    times (expand.context_message) in the same stage (`python -m bench.peers_ab ab --rounds 2`,
    764 searches, load 3.8): the fusion stage's p50 5.27 → 3.88 ms, every answer the same."""

    def __init__(self, q: str, now: datetime, params: RecallParams):
        self.q, self.params = q, params
        self.now_s = now.timestamp()
        self.window = query_window(q, now) if params.when_boost > 0 else None
        self.candidates: dict[tuple[str, int], Candidate] = {}
        self._fused: dict[tuple[str, int], float] = {}  # before support: ranked() starts from it
        self._best: dict[tuple[tuple[str, int], str], float] = {}  # (candidate, route) -> best member
        self._decay: dict[tuple[str, int], float] = {}  # what ranked() decayed (a stamp change drops it)
        self._asked: set[str] = set()  # speakers named_speakers looked for in the question
        self._named: set[str] = set()  # those it found

    def add_all(self, rankings: dict[str, list[RouteHit]]) -> None:
        """Fuse every route's list of `rankings`, in their order."""
        for route, hits in rankings.items():
            self.add(route, hits)

    def add(self, route: str, hits: list[RouteHit]) -> None:
        """Fuse one route's list (best first) into the candidates."""
        params = self.params
        weight = params.hop_weight if route in HOP_ROUTES else params.weights.get(route, 1.0)
        if weight <= 0:
            return  # a route weighed 0 is off
        if route in VECTOR_ROUTES:
            hits = [h for h in hits if h.score >= params.min_similarity]
        if not hits:
            return
        top = max(h.score for h in hits)
        bottom = min(h.score for h in hits) if params.normalise == "minmax" else 0.0
        spread = top - bottom
        merge = params.episode_hits != "apart"
        summed = params.episode_hits == "sum"
        rrf = params.fusion == "rrf"
        exponent, rrf_k = params.quality_exponent, params.rrf_k
        candidates, fused, best = self.candidates, self._fused, self._best
        for rank, hit in enumerate(hits, start=1):
            covered = merge and hit.kind == MESSAGE and hit.episode is not None
            key = (EPISODE, hit.episode) if covered else (hit.kind, hit.id)
            cand = candidates.get(key)
            if cand is None:
                cand = candidates[key] = Candidate(
                    kind=key[0], id=key[1], stamp=hit.stamp, speaker="" if covered else hit.speaker
                )
                fused[key] = 0.0
            elif hit.kind == EPISODE:
                cand.stamp = hit.stamp  # the episode's own time, not its first message hit's
                self._decay.pop(key, None)
            quality = max(0.0, min(1.0, hit.quality)) ** exponent
            if rrf:
                value = weight * quality / (rrf_k + rank)
            else:
                value = weight * quality * ((hit.score - bottom) / spread if spread > 0 else 1.0)
            entry = {"rank": rank, "score": round(hit.score, 4)}
            if not covered:
                cand.routes[route] = entry
                fused[key] += value
                continue
            member = cand.hits.setdefault(hit.id, {"score": 0.0, "routes": {}})
            member["score"] += value
            member["routes"][route] = entry
            cand.routes.setdefault(route, entry)  # the route's rank of the episode's best hit
            if summed:
                fused[key] += value
            elif value > best.get((key, route), 0.0):
                fused[key] += value - best.get((key, route), 0.0)
                best[(key, route)] = value

    def ranked(self) -> list[Candidate]:
        """Every candidate so far, best first: score = its fused score supported by nearby hits
        (`add_support`) × its decay, the age decay (`decay_factor`) times the weight of a named
        time (`when_factor`; 1 when the query names none) and of a named speaker
        (`speaker_factor`). A candidate's decay does not change with what is added later (unless
        an episode's own hit changes its time), so it is computed once."""
        fused = self._fused
        for key, cand in self.candidates.items():
            cand.fused = fused[key]
        candidates = list(self.candidates.values())
        add_support(candidates, self.params)
        params = self.params
        if params.speaker_boost > 0:
            new = {c.speaker for c in candidates} - self._asked
            self._named |= named_speakers(self.q, new)
            self._asked |= new
        known = self._decay
        for key, cand in self.candidates.items():
            decay = known.get(key)
            if decay is None:
                decay = known[key] = (
                    decay_factor(cand, self.now_s, params)
                    * when_factor(cand, self.window, params)
                    * speaker_factor(cand, self._named, params)
                )
            cand.decay = decay
            cand.score = cand.fused * decay
        return sorted(candidates, key=lambda c: (-c.score, c.kind, -c.id))


def add_support(candidates: list[Candidate], params: RecallParams) -> list[Candidate]:
    """Conversation hits lend each other weight by closeness in time. A message or episode gains
    `neighbour_weight` × the fused scores of the hits up to `neighbour_seconds` before it, and
    `neighbour_after_weight` × those of the hits as far after it (the turns around it: a reply
    often shares its words with the turn it answers, not with the question), plus
    `burst_weight` × the best fused score of another hit within `burst_seconds` (the same
    sitting of the conversation: a question about one exchange matches several of its turns).
    Support is read from the scores before any is added. Hits at the same time lend to one
    another in the order of the ranking before support (the larger fused score first, then kind
    and newest id) whatever the order of `candidates`. Knowledge (memories, entries) neither
    gives nor takes support."""
    near = params.neighbour_seconds if params.neighbour_weight > 0 or params.neighbour_after_weight > 0 else 0
    burst = params.burst_seconds if params.burst_weight > 0 else 0
    timed = sorted(
        (c for c in candidates if c.kind in (MESSAGE, EPISODE) and c.stamp[0] is not None),
        key=lambda c: (c.stamp[0], -c.fused, c.kind, -c.id),
    )
    if (near <= 0 and burst <= 0) or len(timed) < 2:
        return candidates
    times = [c.stamp[0] for c in timed]
    base = [c.fused for c in timed]
    prefix = [0.0]
    for value in base:
        prefix.append(prefix[-1] + value)
    before_w, after_w, burst_w = params.neighbour_weight, params.neighbour_after_weight, params.burst_weight
    for i, when in enumerate(times):
        gain = 0.0
        if near > 0:
            lo, hi = bisect_left(times, when - near), bisect_right(times, when + near)
            gain += before_w * (prefix[i] - prefix[lo]) + after_w * (prefix[hi] - prefix[i + 1])
        if burst > 0:
            lo, hi = bisect_left(times, when - burst), bisect_right(times, when + burst)
            if hi - lo > 1:
                # The best of the others: the window's best, unless that is this hit's own score
                # (then the window is searched again without it).
                best = max(base[lo:hi])
                if base[i] == best:
                    best = max(base[lo:i] + base[i + 1 : hi])
                gain += burst_w * best
        timed[i].fused += gain
    return candidates


def rank(rankings: dict[str, list[RouteHit]], q: str, now: datetime, params: RecallParams) -> list[Candidate]:
    """The ranking of a search: the routes' lists fused, supported by nearby hits and decayed,
    a named time ("in June", "on 7 July, 2023", "the week before …") weighing conversation hits
    that fall in it."""
    fusion = Fusion(q, now, params)
    fusion.add_all(rankings)
    return fusion.ranked()


def named_speakers(q: str, speakers: set[str]) -> set[str]:
    """The speakers among `speakers` that the question names: the whole name or its first word
    (at least two letters each), as a word. A question with capitals must write it with a capital
    ("When will Bob come?" names no speaker "Will"); an all-lower-case one in any case ("when did
    fahim move" names "Fahim Khan")."""
    cased = q != q.lower()
    named = set()
    for speaker in speakers:
        words = speaker.split()
        forms = {form for form in (speaker, words[0] if words else "") if len(form) >= 2}
        for form in forms:
            found = re.finditer(rf"(?<!\w){re.escape(form)}(?!\w)", q, re.IGNORECASE)
            if any(not cased or m.group(0)[0].isupper() for m in found):
                named.add(speaker)
                break
    return named


def speaker_factor(cand: Candidate, named: set[str], params: RecallParams) -> float:
    """1 + `speaker_boost` for a message said by someone the question names, else 1: "What did
    Caroline paint?" is answered in what Caroline said far more often than in what was said to her
    (on the LoCoMo dev split, 335 of the 344 questions naming one speaker have evidence said by
    them)."""
    return 1.0 + params.speaker_boost if cand.speaker and cand.speaker in named else 1.0


def best_fused(params: RecallParams) -> float:
    """The highest fused score a candidate can get: a perfect match first in every route."""
    total = sum(params.weights.values())
    return total / (params.rrf_k + 1) if params.fusion == "rrf" else total


def _half_life(age_seconds: float, days: float) -> float:
    if days <= 0:
        return 1.0
    return 0.5 ** (max(age_seconds, 0.0) / (days * SECONDS_PER_DAY))


def decay_factor(cand: Candidate, now_s: float, params: RecallParams) -> float:
    """Messages, episodes and short-term memories decay fully with age; knowledge (semantic and
    procedural memories, entries) only down to `knowledge_floor`. Memories whose validity ended
    are history and rank below current ones. `now_s`: now in epoch seconds."""
    when = cand.stamp[0]
    if when is None:
        return 1.0
    age = now_s - when
    if cand.kind in (MESSAGE, EPISODE):
        return _half_life(age, params.message_half_life_days)
    if cand.kind == MEMORY and cand.tier in Memory.SHORT_TERM_TIERS:
        factor = _half_life(age, params.message_half_life_days)
    else:
        floor = params.knowledge_floor
        factor = floor + (1 - floor) * _half_life(age, params.knowledge_half_life_days)
    valid_to = cand.stamp[2]
    if cand.kind == MEMORY and valid_to is not None and valid_to <= now_s:
        factor *= params.history_factor
    return factor


def when_factor(cand: Candidate, window: Window | None, params: RecallParams) -> float:
    """1 + `when_boost` for a message, episode or memory whose time is in the window the query
    names (widened by `when_slack_days` either side: people speak of a day shortly after it),
    else 1. A memory's time is when it held (valid_from, else when it was written), not its last
    edit; an entry has none of its own."""
    if window is None or cand.kind not in (MESSAGE, EPISODE, MEMORY):
        return 1.0
    when = cand.stamp[4] if cand.kind == MEMORY else cand.stamp[0]
    return 1.0 + params.when_boost if window.holds(when, params.when_slack_days * SECONDS_PER_DAY) else 1.0


def get_reranker():
    """The configured reranker (`BRAIN_RECALL_RERANKER`, a dotted path to a callable taking
    `(query, candidates)` and returning one relevance in [0, 1] per candidate), or None."""
    path = getattr(settings, "BRAIN_RECALL_RERANKER", "")
    return import_string(path) if path else None


def apply_reranker(q: str, candidates: list[Candidate], params: RecallParams) -> tuple[list[Candidate], str]:
    """Let the optional reranker re-weigh the top candidates: score × (0.5 + relevance). A failing
    reranker changes nothing (recall must answer) and its reason is reported."""
    reranker = get_reranker()
    if reranker is None or not candidates:
        return candidates, "off"
    top = [c for c in candidates[: params.rerank_top] if c.obj is not None]
    try:
        scores = list(reranker(q, top))
        if len(scores) != len(top):
            raise ValueError(f"reranker returned {len(scores)} scores for {len(top)} candidates")
    except Exception as exc:  # noqa: BLE001 - any reranker failure falls back to fused order
        return candidates, f"failed: {exc}"
    for cand, relevance in zip(top, scores, strict=True):
        cand.rerank = max(0.0, min(1.0, float(relevance)))
        cand.score = cand.score * (0.5 + cand.rerank)
    rest = [c for c in candidates if c.rerank is None]
    return sorted(top + rest, key=lambda c: -c.score), "on"
