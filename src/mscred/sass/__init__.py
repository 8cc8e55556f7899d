"""Read, probe, patch and run CUDA machine code: the "Reverse-Engineering NVIDIA" articles as a library.

Modules (each imported on use; importing this package needs nothing beyond the standard library):
  cubin     Cubin / Kernel: kernels, instruction words, .nv.info attributes of a cubin (pyelftools)
  fatbin    find_images / cubins: the cubins inside executables, objects, shared libraries and .fatbin files
  pe        the fatbin sections (.nv_fatb) of a Windows .exe / .dll (pefile), its header checksum
  isa       instruction layouts (64-bit + control words on sm_5x/6x, 128-bit from sm_70), bit fields
  literals  C integer literals (0xcc, 0314, 204u, 1'000): probe's values and every numeric option, read alike
  toolchain nvcc / CUDA 12 ptxas / nvdisasm discovery, compile_cubin, disassemble
  probe     probe: compile variants of a template and locate an immediate or register field
  patch     patch_file: rewrite one field of one instruction, safely
  run       run_cubin: launch a kernel through the CUDA driver (cuda-python or CuPy)
  inspect   inspect_file: registers, local and shared memory, instruction mix per kernel
The CLI is `mscred sass` (mscred/cli/sass.py); docs/sass.md walks through it.
"""
