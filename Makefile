# Two commands do all set-up on a fresh machine:
#   make train   create .venv, install, run the training flow on the embedded corpus
#   make test    create .venv, install Chromium (make browser), run ruff, build the docs, run the tests
# While working: make check   ruff and the fast tier (the tests not marked slow, tests/conftest.py)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

# One place for state and telemetry: every target runs with these, and `eval "$$(make -s env)"`
# gives a shell the same ones (the README's lifecycle commands start with it), so `make train`,
# `prefect server start`, `mlflow server` and `xmc serve` share one Prefect home and one MLflow
# store (data/mlflow/mlflow.db, the config's default tracking URI).
export DO_NOT_TRACK ?= true
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export MLFLOW_DISABLE_TELEMETRY ?= true
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION ?= false
export HF_HUB_OFFLINE ?= 1
export PREFECT_HOME ?= $(CURDIR)/data/prefect
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120
export XMC_PROJECT_DIR ?= $(CURDIR)
ENV_VARS := DO_NOT_TRACK PREFECT_SERVER_ANALYTICS_ENABLED MLFLOW_DISABLE_TELEMETRY \
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION HF_HUB_OFFLINE PREFECT_HOME \
	PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS XMC_PROJECT_DIR

.PHONY: install browser train test check lint format bench-featurize clean env docs
.PHONY: peers-venv bench-peers bench-families bench-end-to-end bench-scaling

# Installing compiles, once and not in every process that starts: the numba kernels
# (xmc_core/app/compile_kernels.py) beside the bytecode of every installed package and of this
# tree (xmc_core/app/compile_bytecode.py), the two at once on the machine's cores. pip writes no
# bytecode (--no-compile): its own step would take about two minutes more on one core.
install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -e '.[dev,astec,onnx,docs]'
	$(PY) -m xmc_core.app.compile_kernels & kernels=$$!; \
	  $(PY) -m xmc_core.app.compile_bytecode; bytecode=$$?; wait $$kernels && exit $$bytecode
	rm -f $(VENV)/.installed-* && touch $(STAMP)

env:
	@$(foreach v,$(ENV_VARS),echo "export $(v)='$($(v))'";)

# Headless Chromium for the browser test (tests/ui/): Debian's package, never a download.
# Does nothing when chromium is on PATH or XMC_SKIP_BROWSER=1; uses sudo when not root.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

browser:
	@if [ "$(XMC_SKIP_BROWSER)" = 1 ] || command -v chromium >/dev/null; then :; else \
	  echo "installing Chromium (Debian package) for the browser test"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends chromium >/dev/null; fi

train: $(STAMP)
	$(PY) -m flows.train $(ARGS)

# The whole suite on TEST_WORKERS processes (pytest-xdist), a test module at a time each, the
# longest modules first (tests/conftest.py: LONGEST_FIRST); TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2

test: $(STAMP) browser
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(MAKE) --no-print-directory docs
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(ARGS)

# The documentation site (mkdocs.yml, docs/) into site/ (git-ignored); strict: a broken link, a
# missing anchor or a page left out of the nav fails the build. docs/reference/ is generated
# (python -m xmc_core.app.config_reference, python -m xmc_core.app.cli_reference) and checked by
# tests/docs/; the plots in docs/assets/plots/ come from benchmarks/plots.py.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -m "not slow" $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench-featurize: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(PY) benchmarks/featurize.py $(ARGS)

# The XMC peers (PECOS, napkinXC, Omikuji) need numpy<2, so they get their own venv.
PEERS_VENV ?= .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed-$(shell cat benchmarks/requirements-peers.txt | cksum | cut -d' ' -f1)

peers-venv: $(PEERS_STAMP)

$(PEERS_STAMP): benchmarks/requirements-peers.txt
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet --disable-pip-version-check -r benchmarks/requirements-peers.txt
	rm -f $(PEERS_VENV)/.installed-* && touch $(PEERS_STAMP)

bench-peers: $(STAMP) $(PEERS_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(PY) benchmarks/peers.py --peers-python $(PEERS_VENV)/bin/python $(ARGS)

# End to end from the raw files, stage by stage: ours (ingest, featurize, train, predict) vs PECOS's
# own pipeline (its C++ TF-IDF, then XR-Linear); ARGS as
# `make bench-end-to-end ARGS="--datasets reuters21578-modapte --repeats 1"`.
bench-end-to-end: $(STAMP) $(PEERS_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(PY) benchmarks/end_to_end.py --peers-python $(PEERS_VENV)/bin/python $(ARGS)

# Ours vs PECOS on synthetic corpora up to 1M labels x 1M documents (time, memory, P@1, growth
# exponents, plot); ARGS as `make bench-scaling ARGS="--sizes 10kx10k,100kx100k --timeout 3600"`.
bench-scaling: $(STAMP) $(PEERS_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(PY) benchmarks/scaling.py --peers-python $(PEERS_VENV)/bin/python $(ARGS)

# The model families and their references (PECOS, Omikuji, LibMultiLabel's XML-CNN); ARGS as
# `make bench-families ARGS="--datasets reuters21578-modapte --methods xml-cnn,libmultilabel-xml-cnn"`.
bench-families: $(STAMP) $(PEERS_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(PY) benchmarks/families.py --peers-python $(PEERS_VENV)/bin/python $(ARGS)

clean:
	rm -rf data/artifacts data/datasets data/prefect
