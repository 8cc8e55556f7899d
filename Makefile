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

.PHONY: setup demo test bench lint clean

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

bench: setup
	$(PY) benchmarks/bench_signature.py

lint: setup
	$(PY) -m compileall -q src tests benchmarks

clean:
	rm -rf $(VENV) demo_out build *.egg-info
