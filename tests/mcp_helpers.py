"""Shared for the tests that drive Brain from outside the test process: the test database as a
DATABASE_URL, and the ASGI web app (Django + /mcp/) served by uvicorn on a free loopback port."""

import socket
import threading
import time
from urllib.parse import quote

from django.db import connection


def subprocess_database_url() -> str:
    s = connection.settings_dict
    host = s["HOST"]
    if host.startswith("/"):
        netloc, query = f"{quote(s['USER'])}@", f"?host={quote(host)}"
    else:
        netloc, query = f"{quote(s['USER'])}:{quote(s['PASSWORD'])}@{host}:{s['PORT'] or 5432}", ""
    return f"postgresql://{netloc}/{s['NAME']}{query}"


class AsgiServer:
    """brainsite.asgi's application (a fresh one: the MCP app's lifespan runs once per app)
    under uvicorn in a thread, the way `make run` serves it."""

    def __init__(self):
        import uvicorn

        from brainsite.asgi import build_application

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(build_application(), lifespan="on", log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    def close(self):
        self.server.should_exit = True
        self.thread.join(20)
        self.sock.close()
