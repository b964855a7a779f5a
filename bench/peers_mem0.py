"""Run by mem0ai's venv (not Brain's), from `python -m bench peers`: mem0 2.2.1's own
`Memory.search`, in-process, over the same LoCoMo dev turns and questions Brain answers.

Fair to mem0 on purpose: it embeds with the very model Brain uses (all-MiniLM-L6-v2 int8 ONNX,
Brain's `LocalEmbedder` imported from this repository), in-process, where Brain's searches pay
an HTTP round trip; its vectors live in Qdrant's local mode in a temporary directory; no LLM is
called (turns are added with `infer=False`). argv[1]: a JSON file {"turns": {user: [texts]},
"questions": [[user, q]], "warmup": [[user, q]]}. Prints one JSON line: the search times in ms."""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["MEM0_TELEMETRY"] = "False"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
home = tempfile.mkdtemp(prefix="mem0-peers-")
os.environ["MEM0_DIR"] = home

from mem0 import Memory  # noqa: E402  (after MEM0_DIR and telemetry are set)
from mem0.embeddings.base import EmbeddingBase  # noqa: E402

from knowledge.embeddings.embedder import LocalEmbedder  # noqa: E402


class BrainModel(EmbeddingBase):
    """mem0's embedder interface over Brain's local model (one text per call, as mem0 asks)."""

    def __init__(self):
        super().__init__(None)
        self.model = LocalEmbedder(threads=0)

    def embed(self, text, memory_action=None):
        return self.model.embed([text])[0].tolist()


work = json.loads(Path(sys.argv[1]).read_text())
m = Memory.from_config(
    {
        "vector_store": {
            "provider": "qdrant",
            "config": {"path": f"{home}/qdrant", "collection_name": "peers", "embedding_model_dims": 384},
        },
        "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": 384}},
        "llm": {"provider": "openai", "config": {"api_key": "unused", "model": "unused"}},
        "history_db_path": f"{home}/history.db",
    }
)
m.embedding_model = BrainModel()
start = time.perf_counter()
for user, texts in work["turns"].items():
    for text in texts:
        m.add(text, user_id=user, infer=False)
added = time.perf_counter() - start
for user, q in work["warmup"]:
    m.search(q, top_k=10, filters={"user_id": user})
timings = []
for user, q in work["questions"]:
    t0 = time.perf_counter()
    m.search(q, top_k=10, filters={"user_id": user})
    timings.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"timings": timings, "add_seconds": added}))
