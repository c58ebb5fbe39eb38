# The README's two commands: `make demo` and `make test`. Both create .venv/ on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# `make demo` installs the runtime (requirements.txt); `make test` adds the test tools, the loggers and Ray
# (requirements-test.txt). Each reinstalls when its files change.
STAMP := $(VENV)/.installed-$(shell cat requirements.txt | sha1sum | cut -c1-12)
TEST_STAMP := $(VENV)/.installed-test-$(shell cat requirements.txt requirements-test.txt | sha1sum | cut -c1-12)

.PHONY: demo test test-fast scenarios bench mlflow-suite venv test-venv browser slurm clean

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first and pinned: the CPU build. Anything else asking for torch is then satisfied.
	$(VENV)/bin/pip install --quiet torch==2.13.0
	$(VENV)/bin/pip install --quiet -r requirements.txt
	rm -f $(VENV)/.installed-[0-9a-f]*
	touch $(STAMP)

test-venv: $(TEST_STAMP)

$(TEST_STAMP): $(STAMP) requirements-test.txt
	$(VENV)/bin/pip install --quiet -r requirements.txt -r requirements-test.txt
	rm -f $(VENV)/.installed-test-*
	touch $(TEST_STAMP)

demo: venv
	HF_HUB_OFFLINE=1 $(PY) scripts/demo.py

# Headless Chromium for the browser tests: Debian's package, never a downloaded build.
browser:
	@sh scripts/ensure_chromium.sh

# Debian's slurm-wlm and munge for the Slurm engine tests (installed as root, else those tests skip with the reason).
slurm:
	@sh scripts/ensure_slurm.sh

test: test-venv browser slurm
	HF_HUB_OFFLINE=1 $(PY) scripts/run_tests.py $(ARGS)

# The inner loop: every test but those of the cluster engines and of the browser (pytest.ini's markers), on one
# pytest-xdist worker per core (at most 8: each has its own test database, Redis database and data directory,
# tests/settings.py). `make test` stays one process: the Slurm and Ray clusters are one per machine.
test-fast: test-venv
	HF_HUB_OFFLINE=1 $(PY) scripts/run_tests.py -m "not cluster and not browser" -n auto --maxprocesses=8 $(ARGS)

# The long scenarios (benchmarks/scenarios/: worker loss, database and Redis outages, several hosts, cancel and
# resume, the default launch trained to its end), a minute or more of real training each: out of `make test`'s
# 30 minutes on two cores, and run by .ci/run after it.
scenarios: test-venv
	HF_HUB_OFFLINE=1 $(PY) scripts/run_tests.py benchmarks/scenarios $(ARGS)

# The benchmarks' baseline, an MLflow tracking server, lives in its own venv: never in the product's.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed-$(shell cat benchmarks/requirements-mlflow.txt | sha1sum | cut -c1-12)

$(BENCH_STAMP): benchmarks/requirements-mlflow.txt
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet -r benchmarks/requirements-mlflow.txt
	rm -f $(BENCH_VENV)/.installed-*
	touch $(BENCH_STAMP)

bench: test-venv browser $(BENCH_STAMP)
	EVOLAB_DEV=1 HF_HUB_OFFLINE=1 $(PY) benchmarks/run_all.py

# MLflow's own tracking tests against MLflow's server and Evolab side by side (benchmarks/mlflow_suite.py; not in
# `make test`). MLFLOW_SRC: a checkout of MLflow's repository at the pinned version, e.g.
#   git clone --depth 1 --branch v3.17.2 https://github.com/mlflow/mlflow /tmp/mlflow-src
mlflow-suite: test-venv $(BENCH_STAMP)
	EVOLAB_DEV=1 HF_HUB_OFFLINE=1 $(PY) benchmarks/mlflow_suite.py --mlflow-src "$(MLFLOW_SRC)" $(ARGS)

clean:
	rm -rf $(VENV) $(BENCH_VENV) var staticfiles
