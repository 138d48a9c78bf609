# Two commands for a newcomer:
#   make demo   set up, fetch the default model, build D_c, index this repo, and regenerate
#               5 function bodies of this repo with AR and with FastCoder: a line per function
#               (speedup, accepted length, identical or where and why not), then the aggregate
#   make test   set up and run the whole test suite (what CI runs)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
FC     := $(VENV)/bin/fastcoder
MODEL  ?= qwen2.5-coder-0.5b
DTYPE  ?= bfloat16
# The demo target: functions of this repository, regenerated from signature + docstring
# (empty: fastcoder demo's default five; or e.g. DEMO_TARGETS="fastcoder/drafters.py::resync").
DEMO_TARGETS ?=

.PHONY: setup demo test test-python test-vscode test-web clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(FC) models fetch $(MODEL)
	$(FC) build-common --model $(MODEL)
	$(FC) index . --model $(MODEL)
	$(FC) demo $(DEMO_TARGETS) --model $(MODEL) --dtype $(DTYPE) --workspace .

# Editors the end-to-end tests drive: Neovim (+ tmux for the README capture) and Chromium
# (VS Code's editor, tests/test_browser_client.py). Installed here when root; without them
# those tests skip and say why.
EDITOR_PKGS := $(if $(shell command -v nvim),,neovim) $(if $(shell command -v tmux),,tmux) \
	$(if $(wildcard /usr/bin/chromium),,chromium)

test: setup
	@if [ -n "$(strip $(EDITOR_PKGS))" ] && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq $(EDITOR_PKGS) >/dev/null) \
		|| echo "installing $(EDITOR_PKGS) failed; the tests that need them will skip"; fi
	$(MAKE) test-vscode
	$(MAKE) test-web
	$(MAKE) test-python

test-python: setup
	$(FC) models fetch smollm2-135m --quiet --no-load
	FASTCODER_INSTALL_NVIM=1 $(PY) -m pytest -q -ra; rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose"; exit 1; fi; exit $$rc

test-vscode:
	cd editor-client/vscode && npm ci --no-audit --no-fund --loglevel=error && npm run compile && npm test

# The browser test page (VS Code's editor + the extension's activation code); the
# scenarios themselves run inside pytest (tests/test_browser_client.py).
test-web:
	cd editor-client/web-test && npm ci --no-audit --no-fund --loglevel=error && npm run build

clean:
	rm -rf $(VENV)
