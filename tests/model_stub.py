"""A loopback model server for tests: a real HTTP server on 127.0.0.1 that speaks the OpenAI
chat-completions protocol (and /v1/embeddings), so every model-backed feature is tested through
the real client — including malformed JSON, HTTP errors and slow answers.

Script it with a queue of replies (`reply_json`, `reply_text`, `reply_error`, `reply_malformed`,
`reply_delay`, `reply_cut`) or a function of the request (`respond_with`). It records every
request it got as it arrives, before any delay (`schema_sent` says whether one carried a JSON
schema), and `in_flight` counts the chat requests it has not answered yet. With `slots = 1` it
answers one request at a time, the others waiting in its queue, as llama-cpp-python's server
does (even `GET /v1/models` waits behind a reply being generated).

It behaves like the real servers where that matters: a request whose prompt + max_tokens
exceeds `context_tokens` is refused with vLLM's 400 before any reply is taken from the queue
(the prompt counted with knowledge.tokens, as Brain's estimate does, without its margin), or,
with `trims_budget`, answered with what the context has left and cut there, as
llama-cpp-python does without saying so; with
`json_schema_supported = False` a `json_schema` response_format is refused with a 400 as
servers without structured output do."""

import contextlib
import hashlib
import json
import math
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ModelStub:
    DEFAULT_CONTEXT = 32768

    def __init__(self):
        self._lock = threading.Lock()
        self.replies: deque = deque()
        self.requests: list[dict] = []
        self.handler = None
        self.context_tokens = self.DEFAULT_CONTEXT
        self.json_schema_supported = True
        self.advertise_context = False
        self.in_flight = 0
        self.slots = 0  # 0: every request at once; 1: one at a time, the rest queued
        self.trims_budget = (
            False  # True: a budget past the context is trimmed, not refused (llama-cpp-python)
        )
        self._slot = threading.Semaphore(1)
        self.serving = 0  # requests holding the slot (with `slots`)
        # True: a request asking for a stream is answered token by token (server-sent events), and
        # generation stops when the client has gone (`cancelled` counts them), as llama-cpp-python
        # does; a plain request is computed to its end whoever still waits for it, as there.
        self.streams = False
        self.cancelled = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                with stub._serving():
                    self._get()

            def _get(self):
                if self.path.rstrip("/") == "/v1/models":
                    row = {"id": "stub-model"}
                    if stub.advertise_context:  # as vLLM does
                        row["max_model_len"] = stub.context_tokens
                    self._send(200, json.dumps({"object": "list", "data": [row]}).encode())
                else:
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode(errors="replace")}
                record = {"path": self.path, "headers": dict(self.headers.items()), "json": body}
                with stub._lock:
                    stub.requests.append(record)
                if self.path == "/v1/embeddings":
                    self._send(200, json.dumps(stub._embeddings(body)).encode())
                    return
                if self.path != "/v1/chat/completions":
                    self._send(404, b'{"error": "not found"}')
                    return
                with stub._lock:
                    stub.in_flight += 1
                try:
                    with stub._serving():
                        self._chat(body)
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

            def _chat(self, body):
                refusal = stub._refusal(body)
                if refusal and stub.streams and body.get("stream"):
                    # llama-cpp-python 0.3.36 has answered 200 before it finds the prompt too
                    # long: the stream ends with no event at all (a plain request gets the 400)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if refusal:
                    self._send(400, json.dumps(refusal).encode())
                    return
                spec = stub._next(body)
                spec = stub._trimmed(body, spec)
                if (
                    stub.streams
                    and body.get("stream")
                    and "raw" not in spec
                    and spec.get("status", 200) == 200
                ):
                    self._stream(body, spec)
                    return
                if spec.get("delay"):
                    time.sleep(spec["delay"])
                if "raw" in spec:
                    payload = spec["raw"] if isinstance(spec["raw"], bytes) else spec["raw"].encode()
                elif spec.get("status", 200) != 200:
                    payload = json.dumps({"error": {"message": spec.get("message", "stub error")}}).encode()
                else:
                    content = spec.get("content", "")
                    cut = spec.get("finish_reason") == "length"  # a reply cut at its budget used all of it
                    usage = spec.get("usage") or {
                        "prompt_tokens": stub.prompt_tokens(body),
                        "completion_tokens": int(body.get("max_tokens") or 0)
                        if cut
                        else max(1, len(content) // 4),
                    }
                    usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
                    payload = json.dumps(
                        {
                            "id": "chatcmpl-stub",
                            "object": "chat.completion",
                            "model": body.get("model", ""),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": content},
                                    "finish_reason": spec.get("finish_reason", "stop"),
                                }
                            ],
                            "usage": usage,
                        }
                    ).encode()
                try:
                    self._send(spec.get("status", 200), payload, spec.get("headers"))
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

            def _stream(self, body, spec):
                """The reply as server-sent events, one 4-character "token" every `token_delay` s
                (or `delay` spread over them); a client that went away stops the generation."""
                content = spec.get("content", "")
                tokens = [content[i : i + 4] for i in range(0, len(content), 4)] or [""]
                pause = spec.get("token_delay", spec.get("delay", 0) / len(tokens))

                def event(delta, finish=None):
                    chunk = {"object": "chat.completion.chunk", "model": body.get("model", "")}
                    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
                    return f"data: {json.dumps(chunk)}\n\n".encode()

                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for n, token in enumerate(tokens):
                        time.sleep(pause)
                        last = n == len(tokens) - 1
                        finish = spec.get("finish_reason", "stop") if last else None
                        self.wfile.write(event({"content": token}, finish))
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client closed: stop generating
                    with stub._lock:
                        stub.cancelled += 1
                self.close_connection = True

            def _send(self, status, payload, headers=None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="model-stub", daemon=True)
        self.thread.start()

    # --- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def reset(self):
        with self._lock:
            self.replies.clear()
            self.requests.clear()
            self.handler = None
            self.context_tokens = self.DEFAULT_CONTEXT
            self.json_schema_supported = True
            self.advertise_context = False
            self.slots = 0
            self.trims_budget = False
            self.streams = False
            self.cancelled = 0

    @contextlib.contextmanager
    def _serving(self):
        """One of the server's slots while a request is answered (none to take when unlimited)."""
        if not self.slots:
            yield
            return
        with self._slot:
            self.serving += 1
            try:
                yield
            finally:
                self.serving -= 1

    # --- what a real server refuses ----------------------------------------------------------
    @staticmethod
    def prompt_tokens(body) -> int:
        from knowledge.tokens import count_tokens

        return sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages", []))

    def _refusal(self, body) -> dict | None:
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema" and not self.json_schema_supported:
            return {"error": {"message": "response_format type json_schema is not supported", "code": 400}}
        prompt = self.prompt_tokens(body)
        reply = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        if prompt + reply > self.context_tokens and not (self.trims_budget and prompt < self.context_tokens):
            return {
                "object": "error",
                "type": "BadRequestError",
                "code": 400,
                "message": f"This model's maximum context length is {self.context_tokens} tokens. However, "
                f"you requested {prompt + reply} tokens ({prompt} in the messages, {reply} in the "
                "completion). Please reduce the length of the messages or completion.",
            }
        return None

    def _trimmed(self, body, spec: dict) -> dict:
        """llama-cpp-python's way with a budget past its context: it generates only what the
        context has left and stops there (finish_reason length), without saying so."""
        if not self.trims_budget or spec.get("status", 200) != 200 or "raw" in spec:
            return spec
        prompt = self.prompt_tokens(body)
        left = self.context_tokens - prompt
        if int(body.get("max_tokens") or 0) <= left:
            return spec
        content = spec.get("content", "")[: left * 4]
        return {
            **spec,
            "content": content,
            "finish_reason": "length",
            "usage": {"prompt_tokens": prompt, "completion_tokens": left},
        }

    # --- scripting ---------------------------------------------------------------------------
    def reply_text(self, text: str, **extra):
        self.replies.append({"content": text, **extra})

    def reply_json(self, data, **extra):
        self.reply_text(json.dumps(data), **extra)

    def reply_error(self, status: int = 500, message: str = "stub error", headers=None):
        self.replies.append({"status": status, "message": message, "headers": headers or {}})

    def reply_malformed(self, raw: str = '{"choices": [{"message": '):
        """An HTTP 200 whose body is not JSON at all."""
        self.replies.append({"raw": raw})

    def reply_cut(self, text: str = '{"memories": [{"text": "Ana prefers', **extra):
        """A reply stopped at its token budget: finish_reason "length", the text cut off."""
        self.replies.append({"content": text, "finish_reason": "length", **extra})

    def reply_delay(self, seconds: float, text: str = "{}"):
        self.replies.append({"content": text, "delay": seconds})

    def respond_with(self, fn):
        """Answer every request (once the queue is empty) with fn(request_json) → a reply spec
        dict ({"content": ...} / {"status": ...}) or a plain string (the content)."""
        self.handler = fn

    def _next(self, body) -> dict:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
            handler = self.handler
        if handler is None:
            return {"status": 500, "message": "the model stub has no scripted reply"}
        spec = handler(body)
        return {"content": spec} if isinstance(spec, str) else spec

    # --- what it received --------------------------------------------------------------------
    def chat_requests(self) -> list[dict]:
        with self._lock:
            return [r["json"] for r in self.requests if r["path"] == "/v1/chat/completions"]

    @staticmethod
    def schema_sent(request: dict) -> dict | None:
        """The JSON schema a recorded request sent as structured output (None: it sent none)."""
        fmt = request.get("response_format") or {}
        if fmt.get("type") != "json_schema":
            return None
        return fmt["json_schema"]["schema"]

    @staticmethod
    def prompt(request: dict) -> str:
        """Every message's content of one recorded request, joined."""
        return "\n".join(str(m.get("content", "")) for m in request.get("messages", []))

    # --- embeddings --------------------------------------------------------------------------
    @staticmethod
    def embed(text: str, dimensions: int = 384) -> list[float]:
        """A deterministic bag-of-words vector: texts sharing words are close."""
        vector = [0.0] * dimensions
        for word in text.lower().split():
            digest = hashlib.sha256(word.encode()).digest()
            vector[int.from_bytes(digest[:4], "big") % dimensions] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def _embeddings(self, body) -> dict:
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        dims = int(body.get("dimensions") or 384)
        return {
            "object": "list",
            "model": body.get("model", ""),
            "data": [
                {"object": "embedding", "index": i, "embedding": self.embed(t, dims)}
                for i, t in enumerate(inputs)
            ],
            "usage": {"prompt_tokens": sum(len(t.split()) for t in inputs), "total_tokens": 0},
        }
