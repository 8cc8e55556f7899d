#!/usr/bin/env bash
# Fills build/gpu_pydeps/ with the pure-Python packages the device's Python lacks, copied from this machine's .venv:
# pyelftools and pefile, which the sass extra needs (without pyelftools the GPU suite skipped every sass test, `sass
# run` on a GPU included); the device cannot reach a package index. Carry it to the device (run(carry=["build/gpu_pydeps"]));
# device_env.sh puts it on PYTHONPATH after src/ when it is there.
#   bash benchmarks/gpu_pydeps.sh
set -euo pipefail
SITE=$(.venv/bin/python -c "import elftools, os; print(os.path.dirname(os.path.dirname(elftools.__file__)))")
rm -rf build/gpu_pydeps && mkdir -p build/gpu_pydeps
cp -r "$SITE/elftools" build/gpu_pydeps/
# pefile (Windows PE headers, tests/test_sass_pe.py): the module and its ordinal tables
cp "$SITE/pefile.py" "$SITE/peutils.py" build/gpu_pydeps/
cp -r "$SITE/ordlookup" build/gpu_pydeps/
find build/gpu_pydeps -name __pycache__ -prune -exec rm -rf {} +
du -sh build/gpu_pydeps
