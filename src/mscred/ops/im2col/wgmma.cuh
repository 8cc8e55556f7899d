// Hopper's warpgroup MMA (wgmma) with A from registers, TF32, as the kernels use it (patch_wgmma.cuh, halo_s2.cuh).
// Part of the im2col extension: im2col.cu includes it (see the overview there). The instructions exist on sm_90a
// only: device passes for other targets see none of them (MSCRED_WGMMA_DEVICE undefined) and compile the kernels
// that use them empty; the host launches those kernels only in an sm_90a build (MSCRED_SM90A).
#pragma once

#include <cstdint>

#include "barriers.cuh"  // smem_addr

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MSCRED_WGMMA_DEVICE 1
#endif

namespace mscred_im2col {
// Whether this build launches the wgmma kernels (host side): the extension built for sm_90a.
#if defined(MSCRED_SM90A)
constexpr bool kWgmmaBuild = true;
#else
constexpr bool kWgmmaBuild = false;
#endif
}  // namespace mscred_im2col

namespace mscred_im2col {
namespace {

// Shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle: start address, leading byte offset
// (unused for swizzled K-major layouts: 1), stride byte offset 1024 (8 rows of 128 bytes), layout type 1 = 128B.
// Row r's 16-byte chunk c then lies at chunk c ^ (r % 8) of its 128 bytes, 8-row atoms 1024-byte aligned; a k8-block
// further along K is +32 bytes (+2 in the descriptor).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void* smem_ptr) {
  return (uint64_t)((smem_addr(smem_ptr) & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}
// Byte offset of element k of row r in such an operand of 32-element (128-byte) K-blocks, ROWS rows per K-block.
template <int ROWS>
__host__ __device__ constexpr int sw128_offset(int r, int k) {
  return (k / 32) * ROWS * 128 + r * 128 + ((((k % 32) / 4) ^ (r % 8)) << 4) + (k % 4) * 4;
}

#if defined(MSCRED_WGMMA_DEVICE)
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until at most N committed groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Registers given to wgmmas that may still be running (A fragments) or written by them (accumulators): an empty asm
// that reads and "writes" each, placed after the wait that retires those wgmmas, so that the compiler keeps the A
// registers (does not reuse them) until then and reads the accumulators only after it. Any array of them.
__device__ __forceinline__ void wgmma_keep(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void wgmma_keep(float& r) { asm volatile("" : "+f"(r)::"memory"); }
template <typename T, int N>
__device__ __forceinline__ void wgmma_keep(T (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) wgmma_keep(a[i]);
}

#define MSCRED_WGMMA_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), \
                           "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
// d += A (4 registers, TF32: rows g, g + 8 of the warp's 16 at k t, t + 4, as mma.sync's m16n8k8 A) x B
// (descriptor), m64 nN k8, f32 accumulators d[4j + 2v + h] = (row g + 8v, column 8j + 2t + h), scale-d = 1.
__device__ __forceinline__ void wgmma_m64n64k8_tf32(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
      "{%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
      : MSCRED_WGMMA_D8(0), MSCRED_WGMMA_D8(8), MSCRED_WGMMA_D8(16), MSCRED_WGMMA_D8(24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1u));
}
__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "{%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
      : MSCRED_WGMMA_D8(0), MSCRED_WGMMA_D8(8), MSCRED_WGMMA_D8(16), MSCRED_WGMMA_D8(24), MSCRED_WGMMA_D8(32),
        MSCRED_WGMMA_D8(40), MSCRED_WGMMA_D8(48), MSCRED_WGMMA_D8(56)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1u));
}
#undef MSCRED_WGMMA_D8
#endif  // MSCRED_WGMMA_DEVICE

}  // namespace
}  // namespace mscred_im2col
