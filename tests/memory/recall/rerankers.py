"""Rerankers for tests: plain functions with the reranker contract (query, candidates) -> [0..1]."""


def prefer_error_codes(query, candidates):
    return [1.0 if "E4012" in (getattr(c.obj, "text", "") or "") else 0.0 for c in candidates]


def broken(query, candidates):
    raise RuntimeError("model unavailable")
