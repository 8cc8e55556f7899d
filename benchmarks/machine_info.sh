#!/usr/bin/env bash
# The header of every device call's result file: date, the checkout's commit, the tree of the files that ran, the
# GPU (name, driver, current and max SM clock) and the versions of torch, CUDA, cuDNN, Triton, numpy and pandas.
# On the device the checkout's commit is the session's base commit (the working tree is copied over it), so the
# "tree" line says what really ran: git's hash of the working tree as it is (tracked and untracked, not ignored),
# which equals `git log --format=%T` of the commit holding the same files: find it with
#   git log --format='%h %T' | grep TREE
# Usage: bash benchmarks/machine_info.sh
date -u +%FT%TZ
git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
index=$(mktemp) && cp "$(git rev-parse --git-dir 2>/dev/null)/index" "$index" 2>/dev/null &&
  GIT_INDEX_FILE=$index git add -A . 2>/dev/null && GIT_INDEX_FILE=$index git write-tree 2>/dev/null | sed 's/^/tree /'
rm -f "$index"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__)" 2>&1
# (the data libraries too: the device's own Python had an older pandas than ours, results/gpu_suite_1205_h100/)
python3 -c "import numpy, pandas; print('numpy', numpy.__version__, 'pandas', pandas.__version__)" 2>&1
