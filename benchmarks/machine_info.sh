#!/usr/bin/env bash
# The header of every device call's result file: date, the checkout's commit (on the device, the base commit of the
# copied working tree), the GPU (name, driver, current and max SM clock) and the versions of torch, CUDA, cuDNN and
# Triton. Usage: bash benchmarks/machine_info.sh
date -u +%FT%TZ
git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__)" 2>&1
