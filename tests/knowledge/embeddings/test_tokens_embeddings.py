"""The one token counter and the local embedder (real model, no mocks), plus the
OpenAI-compatible backend against a real loopback HTTP server."""

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest
from django.test import override_settings

from knowledge.embeddings import embedder as embeddings
from knowledge.tokens import count_tokens, truncate_to_tokens


def test_token_counts_are_deterministic_and_add_up_over_lines():
    assert count_tokens("") == 0
    assert count_tokens("the") == 1
    assert count_tokens("password") == 2
    assert count_tokens("E4012!") == 1 + 2 + 1
    a, b = "Alice prefers e-mail.", "Ticket INC-20931 is open (floor 3)."
    assert count_tokens(a + "\n" + b) == count_tokens(a) + count_tokens(b)


def test_truncation_never_exceeds_the_limit():
    text = "The VPN certificate rotation happens every quarter on the first Monday. " * 20
    for limit in (0, 1, 2, 7, 50, 10_000):
        cut = truncate_to_tokens(text, limit)
        assert count_tokens(cut) <= limit
    assert truncate_to_tokens(text, 10_000) == text
    assert truncate_to_tokens(text, 10).endswith("…")


def test_the_local_embedder_gives_unit_vectors_that_capture_meaning():
    vectors = embeddings.embed_texts(
        [
            "The VPN keeps dropping every few minutes",
            "My remote connection to the office network disconnects constantly",
            "We ordered pizza for the team lunch",
        ]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    again = embeddings.embed_texts(["We ordered pizza for the team lunch"])[0]
    assert np.allclose(again, vectors[2], atol=1e-5)  # batching and order do not change a vector


def test_the_local_model_does_not_spin_its_threads_between_runs():
    """Spinning onnxruntime threads take CPU from PostgreSQL and the other web workers."""
    options = embeddings.get_embedder()._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_a_tampered_tokenizer_is_refused(tmp_path):
    bad = tmp_path / "tokenizer.json"
    shutil.copy(embeddings.TOKENIZER_PATH, bad)
    bad.write_bytes(bad.read_bytes() + b" ")
    with pytest.raises(embeddings.EmbeddingError, match="sha256"):
        embeddings.LocalEmbedder(tokenizer_path=bad)


@override_settings(BRAIN_EMBEDDINGS="none")
def test_embeddings_off_means_no_model_and_no_vectors():
    assert embeddings.model_name() == ""
    assert embeddings.get_embedder() is None
    with pytest.raises(embeddings.EmbeddingError):
        embeddings.embed_texts(["x"])


class _Handler(BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.seen.append((self.path, self.headers.get("Authorization"), body))
        data = []
        for i, text in enumerate(body["input"]):
            vec = np.zeros(body.get("dimensions", 384))
            vec[len(text) % 384] = 3.0  # deliberately not unit length
            data.append({"index": i, "embedding": vec.tolist()})
        payload = json.dumps({"data": list(reversed(data))}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def embedding_server():
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Handler.seen = []
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_the_openai_compatible_backend_calls_v1_embeddings_and_normalises(embedding_server):
    with override_settings(
        BRAIN_EMBEDDINGS="openai",
        BRAIN_EMBEDDINGS_BASE_URL=embedding_server + "/v1",
        BRAIN_EMBEDDINGS_MODEL="tiny-embed",
        BRAIN_EMBEDDINGS_API_KEY="sk-test",
    ):
        assert embeddings.model_name() == "openai:tiny-embed"
        vectors = embeddings.embed_texts(["ab", "abc"])
        assert vectors.shape == (2, 384)
        assert vectors[0][2] == pytest.approx(1.0) and vectors[1][3] == pytest.approx(1.0)
        path, auth, body = _Handler.seen[0]
        assert path == "/v1/embeddings" and auth == "Bearer sk-test"
        assert body["model"] == "tiny-embed" and body["input"] == ["ab", "abc"]
        assert "sk-test" not in json.dumps(embeddings.describe())


def test_an_unreachable_endpoint_is_a_clear_error():
    with (
        override_settings(
            BRAIN_EMBEDDINGS="openai",
            BRAIN_EMBEDDINGS_BASE_URL="http://127.0.0.1:9",
            BRAIN_EMBEDDINGS_MODEL="m",
        ),
        pytest.raises(embeddings.EmbeddingError, match="failed"),
    ):
        embeddings.embed_texts(["x"])


def test_repeated_texts_get_the_same_vector_in_their_places():
    vectors = embeddings.embed_texts(["ok", "The VPN is down", "ok"])
    assert vectors.shape == (3, 384)
    assert np.allclose(vectors[0], vectors[2]) and not np.allclose(vectors[0], vectors[1])


def test_count_tokens_equals_the_sum_over_its_pieces():
    """The fast counter counts exactly what the piece rules of the docstring say."""
    import random

    from knowledge.tokens import _PIECE, _piece_tokens

    rng = random.Random(7)
    mixed = "abcXYZ0123456789 \n\t.,;:!?-_'\"éüßж中文🙂"
    runs = "aaaaaaaaaaZZZZZZ0000000000 -é"  # long runs of letters and of digits
    for alphabet in (mixed, runs):
        for _ in range(500):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
            assert count_tokens(text) == sum(_piece_tokens(m.group()) for m in _PIECE.finditer(text)), text


def test_a_repeated_query_is_embedded_once_per_configuration(embedding_server):
    """embed_query remembers recent query vectors: the endpoint is asked once for a query asked
    twice, again for a new query, and again under another model (the configuration is the key)."""
    config = {
        "BRAIN_EMBEDDINGS": "openai",
        "BRAIN_EMBEDDINGS_BASE_URL": embedding_server + "/v1",
        "BRAIN_EMBEDDINGS_API_KEY": "",
    }
    with override_settings(**config, BRAIN_EMBEDDINGS_MODEL="tiny-embed"):
        first = embeddings.embed_query("abc")
        again = embeddings.embed_query("abc")
        assert len(_Handler.seen) == 1
        assert np.array_equal(first, again) and first[3] == pytest.approx(1.0)
        assert not again.flags.writeable  # one shared vector: no caller can change it
        embeddings.embed_query("ab")
        assert len(_Handler.seen) == 2
    with override_settings(**config, BRAIN_EMBEDDINGS_MODEL="other-embed"):
        embeddings.embed_query("abc")
        assert len(_Handler.seen) == 3 and _Handler.seen[2][2]["model"] == "other-embed"
