"""The gunicorn worker class that serves brainsite.asgi: uvicorn's, without its proxy headers.

uvicorn by default believes X-Forwarded-For and X-Forwarded-Proto from any client on
127.0.0.1 (FORWARDED_ALLOW_IPS) and puts the forwarded address in place of the peer's, so a
client on loopback chose its own address: never locked out of the console, never throttled
for bad tokens. Brain decides itself which proxies to believe (BRAIN_PROXY_HOPS,
knowledge.principals.throttle.client_ip; SECURE_PROXY_SSL_HEADER for the scheme), so the
server hands on the address of the peer as it is.

Each worker also loads the query model as it starts (query_model_warm), so the first search is
not the one that pays for loading it."""

import logging
import threading

from uvicorn_worker import UvicornWorker


class BrainUvicornWorker(UvicornWorker):
    CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "proxy_headers": False}

    def load_wsgi(self):
        super().load_wsgi()  # the app is loaded and Django set up
        threading.Thread(target=query_model_warm, name="query-model-warm-up", daemon=True).start()


def query_model_warm() -> None:
    """Load the local query model and run it once, beside the worker's first requests: the first
    search after a start would otherwise spend seconds loading it (a search that comes first waits
    for the load under the embedder's lock instead of starting a second one)."""
    from knowledge.embeddings import embedder as embeddings

    try:
        if embeddings.backend() == "local":
            embeddings.get_embedder().embed(["warm up"])
    except embeddings.EmbeddingError as exc:  # Status reports the configuration error
        logging.getLogger("brain.web").warning("query model not loaded: %s", exc)
