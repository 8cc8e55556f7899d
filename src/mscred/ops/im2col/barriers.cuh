// Shared-memory addresses and barriers (mbarrier) for the kernels whose warps hand buffers over (halo_s2.cuh,
// patch_wgmma.cuh). Part of the im2col extension: im2col.cu includes it (see the overview there).
#pragma once

#include <cstdint>

namespace mscred_im2col {
namespace {

// Shared-memory barriers (mbarrier, sm_80+). In conv_halo3x3s2, named barriers (bar.sync / bar.arrive) instead
// re-aligned all 16 warps every stage, so every consumer ran its epilogue while none ran MMAs (0.066 against 0.063 ms).
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Arrive (release: this thread's earlier shared-memory writes, or reads, are ordered before the phase completes).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared.b64 state, [%0];\n}\n" ::"r"(smem_addr(bar))
               : "memory");
}
// Wait (acquire) until the phase of the given parity has completed. try_wait (sm_90) suspends the thread for a
// while in hardware; built for an older GPU, the sm_80 test_wait spins.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define MSCRED_MBAR_WAIT "mbarrier.test_wait.parity.shared.b64"
#else
#define MSCRED_MBAR_WAIT "mbarrier.try_wait.parity.shared.b64"
#endif
  asm volatile(
      "{\n .reg .pred done;\n"
      "WAIT:\n " MSCRED_MBAR_WAIT " done, [%0], %1;\n"
      " @!done bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#undef MSCRED_MBAR_WAIT
}

}  // namespace
}  // namespace mscred_im2col
