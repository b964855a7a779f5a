"""The gunicorn worker class that serves brainsite.asgi: uvicorn's, without its proxy headers.

uvicorn by default believes X-Forwarded-For and X-Forwarded-Proto from any client on
127.0.0.1 (FORWARDED_ALLOW_IPS) and puts the forwarded address in place of the peer's, so a
client on loopback chose its own address: never locked out of the console, never throttled
for bad tokens. Brain decides itself which proxies to believe (BRAIN_PROXY_HOPS,
knowledge.principals.throttle.client_ip; SECURE_PROXY_SSL_HEADER for the scheme), so the
server hands on the address of the peer as it is."""

from uvicorn_worker import UvicornWorker


class BrainUvicornWorker(UvicornWorker):
    CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "proxy_headers": False}
