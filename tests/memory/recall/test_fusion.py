"""Fusion's shortcuts against the plain definitions, on random route lists: support found through
sorted times and windows equals support summed hit by hit, and a search's second ranking, which
adds the second hop's list to what was fused, equals fusing all the lists at once
(memory.recall.fuse)."""

import random
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memory.recall.fuse import Candidate, Fusion, add_support, rank
from memory.recall.params import DEFAULT_PARAMS, HOP_MESSAGES, ROUTES
from memory.recall.routes import ENTRY, EPISODE, MEMORY, MESSAGE, RouteHit

NOW = datetime(2024, 1, 15, 12, 0, tzinfo=UTC)


def support_by_definition(candidates, params):
    """The fused score each candidate ends with, summed hit by hit as add_support's docstring
    says: hits at the same time lend in the order of the ranking before support; a window of 0
    seconds is off."""
    timed = sorted(
        (c for c in candidates if c.kind in (MESSAGE, EPISODE) and c.stamp[0] is not None),
        key=lambda c: (c.stamp[0], -c.fused, c.kind, -c.id),
    )
    out = {c.key: c.fused for c in candidates}
    for i, c in enumerate(timed):
        t = c.stamp[0]
        before = sum(o.fused for o in timed[:i] if o.stamp[0] >= t - params.neighbour_seconds)
        after = sum(o.fused for o in timed[i + 1 :] if o.stamp[0] <= t + params.neighbour_seconds)
        near = [
            o.fused for j, o in enumerate(timed) if j != i and abs(o.stamp[0] - t) <= params.burst_seconds
        ]
        gain = 0.0
        if params.neighbour_seconds > 0:
            gain += params.neighbour_weight * before + params.neighbour_after_weight * after
        if near:
            gain += params.burst_weight * max(near)
        out[c.key] = c.fused + gain
    return out


@pytest.mark.parametrize("seed", range(200))
def test_support_through_windows_equals_support_summed_hit_by_hit(seed):
    rng = random.Random(seed)
    params = replace(DEFAULT_PARAMS, neighbour_seconds=rng.choice([0.0, 60.0, 120.0]), burst_seconds=300.0)
    candidates = []
    for pk in range(rng.randint(0, 40)):
        kind = rng.choice([MESSAGE, MESSAGE, EPISODE, MEMORY, ENTRY])
        when = None if rng.random() < 0.1 else float(rng.randrange(0, 1200, 30))  # ties and edges
        # Eighths: every sum of a few of them is exact, so both ways must agree to the last bit.
        fused = rng.randrange(0, 24) / 8
        candidates.append(Candidate(kind=kind, id=pk, fused=fused, stamp=(when, None, None, None, None)))
    want = support_by_definition(candidates, params)
    rng.shuffle(candidates)
    add_support(candidates, params)
    assert {c.key: c.fused for c in candidates} == want


def random_lists(rng, routes):
    """Route lists over a few conversations' messages (some covered by an episode), episodes,
    memories and entries, with random scores, qualities and times."""
    speakers = ["Caroline", "Melanie", "Jo Ann", ""]
    lists = {}
    for route in routes:
        hits = []
        for pk in rng.sample(range(60), rng.randint(0, 25)):
            kind = rng.choice([MESSAGE, MESSAGE, MESSAGE, EPISODE, MEMORY, ENTRY])
            when = 1.69e9 + rng.randrange(0, 40) * 600.0
            tier = rng.choice(["working", "semantic", None]) if kind == MEMORY else None
            valid_to = rng.choice([None, 1.69e9, 1.8e9]) if kind == MEMORY else None
            stamp = (when, tier, valid_to, None, when - 3600.0 if kind == MEMORY else None)
            episode = rng.choice([None, pk % 5 + 100]) if kind == MESSAGE else None
            speaker = rng.choice(speakers) if kind == MESSAGE else ""
            score = rng.choice([rng.random(), 0.5])  # some ties
            hits.append(RouteHit(kind, pk, score, rng.uniform(-0.1, 1.1), stamp, episode, speaker))
        hits.sort(key=lambda h: -h.score)
        lists[route] = hits
    return lists


def described(candidates):
    return [(c.kind, c.id, c.fused, c.decay, c.score, c.stamp, c.routes, c.hits) for c in candidates]


@pytest.mark.parametrize("seed", range(120))
def test_adding_the_second_hops_list_ranks_as_fusing_every_list_at_once(seed):
    rng = random.Random(seed)
    params = replace(
        DEFAULT_PARAMS,
        episode_hits=rng.choice(["sum", "best", "apart"]),
        fusion=rng.choice(["wsum", "wsum", "rrf"]),
        normalise=rng.choice(["max", "minmax"]),
    )
    q = rng.choice(["What did Caroline paint in May?", "when did jo move", "What happened yesterday?"])
    lists = random_lists(rng, [*ROUTES, HOP_MESSAGES])
    first = {r: lists[r] for r in ROUTES}
    fusion = Fusion(q, NOW, params)
    for route, hits in first.items():
        fusion.add(route, hits)
    assert described(fusion.ranked()) == described(rank(first, q, NOW, params))
    fusion.add(HOP_MESSAGES, lists[HOP_MESSAGES])
    assert described(fusion.ranked()) == described(rank(lists, q, NOW, params))
