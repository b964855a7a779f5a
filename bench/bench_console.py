"""The console's header search and Status page at the entries bench's size (50,000 entries with
250,000 body blocks, which are memories): server time of 100 searches by one word through the
console view, as an admin, and of 20 loads of the whole Status page (every section, the alerts,
the knowledge lints and the 14-day charts)."""

import random

SEARCHES = 100
STATUS_PAGES = 20


def run(report):
    from django.test import Client

    from bench.bench_entries import _p95, _timed, seed
    from knowledge.principal import Principal
    from knowledge.principals import services

    rng = random.Random(11)
    _, seconds, names_vocab, body_vocab = seed(rng)
    report(
        "console seed (50k entries, 250k blocks)", seconds, "s", target="—", note="the entries bench's data"
    )
    admin = services.consoleuser_create(
        actor=Principal.system("bench"), username="bench-console", role="admin", password="x" * 12
    )
    console = Client(SERVER_NAME="localhost")
    console.force_login(admin)

    words = [rng.choice(body_vocab if i % 2 else names_vocab) for i in range(SEARCHES)]
    for word in words[:5]:  # warm the connection and the caches, as a running server is
        _timed(console, "/search/", {"q": word})
    search = [_timed(console, "/search/", {"q": word}) for word in words]
    report(
        "header search, one word (console)",
        _p95(search),
        "ms p95",
        target="≤ 300 ms",
        note=f"{SEARCHES} words",
    )

    status = [_timed(console, "/knowledge/status/", {}) for _ in range(STATUS_PAGES + 1)][1:]
    report(
        "Status page, whole (console)",
        _p95(status),
        "ms p95",
        target="≤ 300 ms",
        note=f"{STATUS_PAGES} loads after one",
    )
