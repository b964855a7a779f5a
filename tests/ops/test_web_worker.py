"""A web worker loads the query model as it starts, so the first search does not."""

import time

from brainsite.ops import web_worker
from knowledge.embeddings import embedder as embeddings


def test_a_starting_web_worker_loads_the_query_model(monkeypatch):
    started = []
    monkeypatch.setattr(web_worker.UvicornWorker, "load_wsgi", lambda self: started.append("app"))
    monkeypatch.setattr(embeddings, "_cache", {})  # as in a freshly forked worker
    assert not embeddings.describe()["loaded"]
    worker = web_worker.BrainUvicornWorker.__new__(web_worker.BrainUvicornWorker)
    worker.load_wsgi()
    assert started == ["app"]
    deadline = time.monotonic() + 60
    while not embeddings.describe()["loaded"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert embeddings.describe()["loaded"]  # loaded without a search asking for it
