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
	$(PY) -m pytest -q -ra --timeout=900

bench: setup
	$(PY) benchmarks/bench_signature.py

lint: setup
	$(PY) -m compileall -q src tests benchmarks

clean:
	rm -rf $(VENV) demo_out build *.egg-info
