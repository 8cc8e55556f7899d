# The README's two commands: `make demo` and `make test`. Each sets everything up first.
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU machines and CI take the CPU build of torch that lies on disk; a GPU user can override,
# e.g. `make test TORCH_SPEC=torch` to get the CUDA build from the index.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
# The demo needs only the report's plotting and Parquet, not the test tools, Triton and nvcc of the dev extra
# (999 MB + 95 MB installed on the CPU development box); a GPU machine's torch brings Triton itself.
DEMO_STAMP := $(VENV)/.installed-demo
# pytest processes of `make test` (pytest-xdist), each taking whole test files in order: 2 on the 2-core CI machine
# ran the suite in 6m45s against 12m46s in one process (2026-12-02, benchmarks/results/test_suite_time/);
# `make test TEST_WORKERS=0` runs it in one.
TEST_WORKERS ?= 2

.PHONY: setup demo test test-oldest-pandas bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

$(DEMO_STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[report,parquet]"
	touch $(DEMO_STAMP)

setup: $(STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/mscred demo --out demo_out

test: setup
	$(PY) -m pytest -q -ra --timeout=900 -n $(TEST_WORKERS) --dist loadfile

# The data reader's tests under the oldest pandas pyproject.toml allows, in a venv of their own: before 3.1 pandas'
# float parser is not correctly rounded and its reader overflows on huge integers, which the reader corrects
# (results/gpu_suite_1205_h100/ found both on a device's pandas 3.0.6). CI's `make test` runs the newest pandas;
# this target needs the package index. `make test-oldest-pandas OLDEST_PANDAS=3.0.6` checks another version.
OLDEST_VENV ?= .venv-oldest-pandas
OLDEST_PANDAS ?= 2.2.3
DATA_TESTS := tests/test_follow.py tests/test_cli_watch.py tests/test_report.py tests/test_cli_messy.py \
	tests/test_cli_fuzz.py tests/test_io*.py tests/test_datasets*.py tests/test_csv_encoding.py \
	tests/test_evaluate_cli.py tests/test_evaluate_alignment.py tests/test_audit_detect_io.py \
	tests/test_audit_datasets.py tests/test_audit_evaluate.py tests/test_reading.py tests/test_watch_long.py \
	tests/test_resample.py tests/test_watch_stdin.py tests/test_inspect.py tests/test_select_columns.py \
	tests/test_missing_hold.py tests/test_time_zone.py tests/test_hold_sensors.py tests/test_rate_sensors.py \
	tests/test_states.py

test-oldest-pandas:
	test -x $(OLDEST_VENV)/bin/python || python3 -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -c "import torch" 2>/dev/null || $(OLDEST_VENV)/bin/python -m pip install -q "$(TORCH_SPEC)"
	$(OLDEST_VENV)/bin/python -m pip install -q -e ".[dev]" "pandas==$(OLDEST_PANDAS)"
	$(OLDEST_VENV)/bin/python -m pytest -q -ra --timeout=900 -n $(TEST_WORKERS) --dist loadfile $(DATA_TESTS)

bench: setup
	$(PY) benchmarks/bench_signature.py

lint: setup
	$(PY) -m compileall -q src tests benchmarks

clean:
	rm -rf $(VENV) $(OLDEST_VENV) demo_out build *.egg-info
