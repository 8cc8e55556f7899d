# The README's two commands: `make demo` and `make test`. Each sets everything up first.
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU machines and CI take the CPU build of torch that lies on disk; a GPU user can override,
# e.g. `make test TORCH_SPEC=torch` to get the CUDA build from the index.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/mscred demo --out demo_out

test: setup
	$(PY) -m pytest -q -ra --timeout=900

bench: setup
	$(PY) benchmarks/bench_signature.py

lint: setup
	$(PY) -m compileall -q src tests benchmarks

clean:
	rm -rf $(VENV) demo_out build *.egg-info
