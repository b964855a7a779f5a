"""The JSON shape of a memory_search (the API and the recall playground show the same thing)."""

from knowledge.web import times_out
from memory.recall.routes import ENTRY, EPISODE, MEMORY, MESSAGE
from memory.recall.search import SearchOutcome, channel_names


def _routes(cand) -> dict:
    return {name: dict(v) for name, v in cand.routes.items()}


def result_out(item, channels: dict[int, str]) -> dict:
    cand = item.candidate
    obj = cand.obj
    out = {
        "kind": cand.kind,
        "id": cand.id,
        "text": item.text,
        **times_out(obj),
        "tokens": item.tokens,
        "score": round(cand.score, 6),
        "fused": round(cand.fused, 6),
        "decay": round(cand.decay, 4),
        "rerank": cand.rerank,
        "routes": _routes(cand),
        "time": cand.time,
    }
    if cand.kind == MEMORY:
        out.update(
            store=obj.store,
            owner=obj.owner.name,
            tier=obj.tier,
            category=obj.category,
            confidence=obj.confidence,
            entry=obj.entry_id,
            valid_from=obj.valid_from,
            valid_to=obj.valid_to,
            conflict_with=cand.conflict_with,
        )
    elif cand.kind == ENTRY:
        out.update(store=obj.store, owner=obj.owner.name, name=obj.name, type=obj.type)
    elif cand.kind in (MESSAGE, EPISODE):
        out.update(channel=channels.get(obj.channel_id, ""), thread=obj.thread)
        if cand.kind == MESSAGE:
            out.update(external_id=obj.external_id, speaker=obj.speaker_name)
        else:
            out.update(topic=obj.topic)
        out["messages"] = item.messages
        out["expanded_external_ids"] = [m["external_id"] for m in item.messages if not m["hit"]]
    return out


def outcome_out(outcome: SearchOutcome) -> dict:
    channel_ids = [
        i.candidate.obj.channel_id for i in outcome.items if i.candidate.kind in (MESSAGE, EPISODE)
    ]
    channels = channel_names(channel_ids, outcome.scope)
    return {
        "query": outcome.q,
        "now": outcome.now,
        "k": outcome.k,
        "budget_tokens": outcome.budget_tokens,
        "used_tokens": outcome.used_tokens,
        "left_out": outcome.left_out,
        "scope": outcome.scope.describe(),
        "routes": outcome.ranking.routes,
        "reranker": outcome.ranking.reranker,
        "embedding_ms": outcome.ranking.embed_ms,
        "results": [result_out(i, channels) for i in outcome.items],
    }
