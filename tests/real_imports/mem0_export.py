"""Run by mem0ai's venv (not Brain's): build a Mem0 `Memory` store with no network — the
embedder and LLM at the loopback model stub (argv[1]), Qdrant's local mode in a temporary
directory, history in SQLite there — add each person's memories with `infer=False` (stored as
given, no model call), and export each person with the README's line, run as written (with the
user and file name swapped per person). Prints how many memories each export holds."""

import json
import os
import re
import sys
import tempfile
from pathlib import Path

os.environ["MEM0_TELEMETRY"] = "False"
stub_url, readme, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
people = json.loads(sys.argv[4])  # {"alice": [texts], "bob": [texts]}

home = tempfile.mkdtemp(prefix="mem0-")
os.environ["MEM0_DIR"] = home
from mem0 import Memory  # noqa: E402  (after MEM0_DIR and telemetry are set)

model = {"api_key": "sk-stub", "openai_base_url": stub_url}
m = Memory.from_config(
    {
        "vector_store": {
            "provider": "qdrant",
            "config": {"path": f"{home}/qdrant", "collection_name": "brain", "embedding_model_dims": 384},
        },
        "embedder": {"provider": "openai", "config": {**model, "model": "stub-embed", "embedding_dims": 384}},
        "llm": {"provider": "openai", "config": {**model, "model": "stub-model"}},
        "history_db_path": f"{home}/history.db",
    }
)
for person, texts in people.items():
    for text in texts:
        m.add(text, user_id=person, infer=False)

# The README's export line, exactly as documented.
line = re.search(r"`(json\.dump\(m\.get_all\(.*?\))`", readme.read_text()).group(1)
os.chdir(out)
counts = {}
for person in people:
    exec(line.replace('"alice"', json.dumps(person)).replace("mem0.json", f"{person}.json"))
    counts[person] = len(json.loads((out / f"{person}.json").read_text())["results"])
print(json.dumps(counts))
