# Set-up and entry points. Only Python, git and make are assumed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STORE := $(CURDIR)/.autodoc-demo/autodoc.db

.PHONY: setup demo lint test test-fast test-install bench screenshots clean

$(STAMP): pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

setup: $(STAMP)

# The main job: index a real folder (this repository: its README, docs,
# protocol and test corpora) with the bundled model, then search it.
demo: $(STAMP)
	$(BIN)/autodoc --store $(DEMO_STORE) workspace add autodoc $(CURDIR) --if-missing
	$(BIN)/autodoc --store $(DEMO_STORE) index autodoc
	$(BIN)/autodoc --store $(DEMO_STORE) search -w autodoc "$(or $(Q),how are search results fused)"

# The gates: lint and format (ruff), then types (mypy, configured in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check daemon clients/python tests bench tools
	$(BIN)/ruff format --check daemon clients/python tests bench tools
	$(BIN)/python tools/gen_docs.py --check
	$(BIN)/mypy

# Two workers, a test file to each at a time: most of the suite waits on real processes and
# sockets, so two run in about two thirds of the time one takes on this 2-core machine.
test: $(STAMP) lint
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The inner loop: the gates, then everything not marked slow (no e2e processes).
test-fast: $(STAMP) lint
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not slow"

# The built wheel in a fresh venv outside the tree, once per supported Python
# (pyenv's interpreters when present, else whatever pythonX.Y is on PATH).
INSTALL_PYTHONS ?= 3.11 3.12 3.13
test-install: $(STAMP)
	@set -e; for v in $(INSTALL_PYTHONS); do \
	  py=$$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V | tail -1); \
	  py=$${py:-$$(command -v python$$v)}; \
	  echo "== test-install with $$py"; \
	  AUTODOC_TEST_PYTHON=$$py $(BIN)/python -m pytest -s tests/e2e/test_install.py; \
	done

bench: $(STAMP)
	$(BIN)/python -m bench.quality
	$(BIN)/python -m bench.known_item
	$(BIN)/python -m bench.answers
	$(BIN)/python -m bench.agents
	$(BIN)/python -m bench.speed
	$(BIN)/python -m bench.concurrency

# The SVG screenshots of `autodoc tui`'s three pickers in docs/tui/ (linked from the README).
screenshots: $(STAMP)
	$(BIN)/python docs/tui/screenshots.py

clean:
	rm -rf $(VENV) .autodoc-demo
