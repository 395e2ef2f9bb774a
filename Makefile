# turnledger — the two commands a fresh machine needs are `make run` and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
TL     := $(VENV)/bin/turnledger
DB     ?= turnledger.duckdb
STAMP  := $(VENV)/.installed

.PHONY: run test install browser samples lint bench clean frameworks-doc

## run: install into .venv and start the collector + dashboard on ./turnledger.duckdb
## (an empty ledger is loaded with sample_traces/ first). Ctrl-C stops both.
run: install
	$(TL) up --db $(DB)

## test: install everything (incl. Debian chromium for browser tests) and run the whole suite,
## on two workers (WORKERS=0 for one process), each test file kept whole on one worker
WORKERS ?= 2
test: install browser
	$(PY) -m pytest -n $(WORKERS) --dist loadfile

install: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Browser tests drive Debian's chromium through Playwright; never a downloaded browser.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian chromium for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "warning: could not install chromium; browser tests will be skipped"; }

## samples: regenerate sample_traces/ (generated files; do not edit by hand)
samples: install
	$(TL) samples --out sample_traces

## frameworks-doc: run the live framework matrix, then write docs/frameworks.md from its results
frameworks-doc: install
	-$(PY) -m pytest -n $(WORKERS) --dist loadfile tests/frameworks
	$(PY) -m tests.frameworks.report

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy ledger collector dashboard

bench: install
	@for b in benchmarks/*.py; do case $$b in */agent_workload.py) continue;; esac; echo "== $$b"; $(PY) $$b; done

clean:
	rm -rf $(VENV) $(DB) .pytest_cache
