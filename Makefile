# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need.
# `make test-fast` leaves out the Spark tests and those marked slow (meant to take under a minute
# on an idle 2-core machine); `make test` runs everything.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install test explore test-fast test-long bench peer-bench demo loadtest experiment experiment-sim proto serve clean docs docs-serve

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -e '.[test,spark,loadtest,docs]'
	@rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

# Headless Chromium from Debian, for the status page's browser test (skipped where it cannot be installed)
BROWSER := /usr/bin/chromium-headless-shell
$(BROWSER):
	-command -v apt-get >/dev/null && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null

# the in-process tests (no servers, no Spark) on both cores, file by file; then the servers' and
# Spark's on both cores too (each file in one worker: a module's servers and SparkSession are its own)
test: $(STAMP) $(BROWSER)
	$(PY) -m pytest -p no:randomly -n 2 --dist loadfile -m "not long and not slow and not spark"
	$(PY) -m pytest -p no:randomly -n 2 --dist loadfile -m "not long and (slow or spark)"

# what make test leaves out to stay within its time: more seeds and examples of checks it runs once
test-long: $(STAMP) $(BROWSER)
	$(PY) -m pytest -m long

# the property tests with new random examples each run (make test draws the same ones every run)
explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(PY) -m pytest -p no:randomly -n 2 --dist loadfile -m "not long and not slow and not spark" \
		$$(grep -l "@given" tests/test_*.py)

test-fast: $(STAMP)
	$(PY) -m pytest -m "not spark and not slow and not long"

bench: $(STAMP)
	$(PY) -m bench.run

# windowstore against DuckDB and chDB in process (issue 33's peers; chDB is installed here only)
peer-bench: $(STAMP)
	$(PY) -m pip install -q -e '.[peer]'
	$(PY) -m bench.peer_bench

proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -Iproto --python_out=proto --pyi_out=proto --grpc_python_out=proto proto/windowstore/v1/*.proto

serve: $(STAMP)
	$(VENV)/bin/windowstore serve

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# The documentation site (MkDocs + Material): docs/ and mkdocs.yml -> site/, warnings are errors.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

demo: $(STAMP)
	$(VENV)/bin/windowstore demo

loadtest: $(STAMP)
	$(PY) loadtest/run.py --duration-s $${DURATION:-30} --out docs/loadtest

experiment: $(STAMP)
	$(PY) loadtest/experiment.py --out docs/experiment

experiment-sim: $(STAMP)
	$(PY) -m bench.experiment_sim

# Section 5 of Lee and Lee (Sensors 2010), timing correlation, scaled to minutes (docs/timing.md)
.PHONY: timing-experiment
timing-experiment: $(STAMP)
	$(PY) -m bench.timing_experiment --out docs/timing

.PHONY: sharing-experiment sharing-experiment-real sharing-bench
sharing-experiment: $(STAMP)
	$(PY) -m bench.sharing_experiment --out docs/sharing --updates 200

# the same 8.5 workload on real servers, a server per --sharing mode and point, paced ingest: under the default
# policy on one stream, then as the thesis ran it (--policy ws, a stream per group); about 20 + 40 minutes (docs/sharing.md)
sharing-experiment-real: $(STAMP)
	$(PY) -m bench.sharing_real --out docs/sharing/real/ttu --register-s 30
	$(PY) -m bench.sharing_real --out docs/sharing/real/ws8 --policy ws --streams 8 --register-s 100 --seconds 15

sharing-bench: $(STAMP)
	$(PY) -m bench.sharing_bench

# Section 7 of the temporal coalescing paper (docs/coalesce.md): the module's eager and lazy extents,
# then the store's query path, over the cp x oop grid, with plots; QUICK=1 for 20,000 / 10,000 tuples.
.PHONY: coalesce-experiment
coalesce-experiment: $(STAMP)
	$(PY) -m bench.coalesce_experiment --out docs/coalesce $${QUICK:+--quick}
	$(PY) -m bench.temporal_experiment --out docs/coalesce $${QUICK:+--quick}

# The chosen coalescing plan against eager, lazy and an A/A control over section 7's full 11 x 11
# grid through the store's query path: four repeats of 15,000 tuples per cell on fresh copies (the
# verdict over the repeats), section 7.1's window of 1,000 tuples (11-39 minutes on two loaded
# cores; docs/coalesce.md, "Is the chosen plan never worse?").
.PHONY: coalesce-choice
coalesce-choice: $(STAMP)
	$(PY) -m bench.temporal_experiment --tuples 15000 --per-slide 100 --repeats 4 --aa --out docs/coalesce/choice --shipped-costs

# Section 6.3 of the thesis (frequent items from top-k lists): docs/frequent-items.md compares its figures
.PHONY: frequent-experiment
frequent-experiment: $(STAMP)
	$(PY) -m bench.frequent_experiment

.PHONY: partition-bench
partition-bench: $(STAMP)
	$(PY) -m bench.partition_bench --json bench/results/partition_bench.json

# a follower's applied slide against its leader's under ingest (issue 36's follower-lag goal):
# two servers, replication 2, acks=all then acks=leader, LAG_S seconds each; RATE rows/s paced (default: back to back)
.PHONY: replication-lag
replication-lag: $(STAMP)
	$(PY) -m bench.replication_bench --lag --seconds $${LAG_S:-10} $${RATE:+--rate $$RATE} --json $${OUT:-bench/results/replication_lag.json}

fuzz: $(STAMP)
	$(PY) tests/differential.py --cases $${CASES:-100000} --seed $${SEED:-1}
	$(PY) tests/slicing_fuzz.py --cases $${SLICING_CASES:-5000} --seed $${SEED:-1}

crash: $(STAMP)
	$(PY) tests/crash.py --kills $${KILLS:-100} --seed $${SEED:-1} --sharing $${SHARING:-mixed}

.PHONY: partition-kills
partition-kills: $(STAMP)
	$(PY) tests/partition_kills.py --kills $${KILLS:-40} --seed $${SEED:-1}

fuzz-rpc: $(STAMP)
	$(PY) tests/fuzz_rpc.py --requests $${REQUESTS:-100000} --seed $${SEED:-1}

# Jepsen-style faults against automatic failover (tests/chaos.py, docs/failover.md): 3 servers and
# etcd on 127.0.0.1; FAULTS kills, pauses, etcd pauses and network partitions (through the proxies
# of tests/netfault.py) during acks=all ingest, bounded by MAX_S.
.PHONY: chaos
chaos: $(STAMP)
	$(PY) tests/chaos.py --faults $${FAULTS:-200} --max-s $${MAX_S:-3000} --out $${OUT:-bench/results/chaos.json}
