"""What a search process remembers about the data between searches: nothing that can change a
ranking (issue 49: a search's answer must not depend on which web worker gives it). Whether any
episode exists is read by the episode search itself; keyword statistics are read with every
search; the exact-or-HNSW choice is made inside each vector statement."""


def forget_stats() -> None:
    """Kept for callers that reset a process between data sets (tests, benchmarks): recall keeps
    no statistics about the data, so there is nothing to forget."""
