# The few verbs a newcomer needs. `make run` and `make test` work on a fresh clone.
PY := .venv/bin/python
VENV_STAMP := .venv/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: run test lint format bench browser-deps stop-db clean

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

test: $(VENV_STAMP) browser-deps
	$(PY) -m pytest -q

lint: $(VENV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: $(VENV_STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: $(VENV_STAMP)
	$(PY) -m bench

stop-db: $(VENV_STAMP)
	$(PY) -c "from brainsite.embedded_db import embedded_stop; embedded_stop()"

clean:
	rm -rf .venv var/staticfiles
