// Hopper warpgroup MMA (wgmma, sm_90a) for the resident ConvLSTM kernel's recurrent GEMM: the four warps of a
// warpgroup multiply a 64-pixel tile (A, each warp's 16 rows in registers, the mma.sync m16n8k16 A-fragment layout
// that ldmatrix gives) by a unit's 128 gate columns of the weight (B, read by the tensor cores from shared memory
// through a descriptor), into the 64 float32 accumulators per thread that mma.sync's sixteen n8 tiles would have
// (the same row / column layout per warp). One wgmma reads each B element once per 64 pixels where mma.sync read
// it once per 16 (the weight's ldmatrix traffic was what the kernel's warps mostly waited on).
//
// B's layout in shared memory (no swizzle, K-major): 8 x 8 "core matrices" (8 gate columns, 8 k of 16 bytes each:
// 128 contiguous bytes), the column groups of a unit 128 bytes apart (the stride byte offset), the two k halves of
// a k16 step 2,048 bytes apart (the leading byte offset); CUTLASS's INTERLEAVE K-major layout,
// ((8, n), (8, 2)) : ((16 B, SBO), (2 B, LBO)).
#pragma once

#include <cstdint>

namespace mscred_resident {

// Descriptor of a B operand at shared address `addr` (bytes): start, leading and stride byte offsets in 16-byte
// units, layout type 0 (no swizzle) in bits 62-63.
__device__ __forceinline__ uint64_t wgmma_desc(unsigned addr, unsigned lead_bytes, unsigned stride_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lead_bytes >> 4) << 16) |
         (static_cast<uint64_t>(stride_bytes >> 4) << 32);
}

// Orders this thread's register writes (A fragments, accumulators) before the wgmma instructions that read them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// Shared-memory stores of the generic proxy (the weight, written by the block's threads) made visible to the
// tensor cores' async proxy that wgmma reads B through.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Keeps values in registers up to here: a wgmma reads its register operands asynchronously, after the instruction
// issues, so the compiler must not reuse them before wgmma_wait_all (CUTLASS's warpgroup_fence_operand).
__device__ __forceinline__ void keep_in_registers(float& v) { asm volatile("" : "+f"(v)::"memory"); }
__device__ __forceinline__ void keep_in_registers(uint32_t& v) { asm volatile("" : "+r"(v)::"memory"); }

// The 64 float32 accumulators of an m64n128 wgmma as inline-asm operands %0-%63 (this thread's d[16][4]).
#define MSCRED_WGMMA_ACCUMULATORS(d)                                                                                  \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),            \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),        \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),        \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),        \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),        \
      "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),      \
      "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),                 \
      "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),                 \
      "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),                 \
      "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])

// d (64 x 128, float32; this warp's 16 rows as d[n8 tile][4]) = A (64 x 16 bf16, this warp's rows in a[4]) x B
// (16 x 128 bf16 at `desc`) + (accumulate ? d : 0).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc,
                                                 bool accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %69, p, 1, 1, 0;\n}\n"
      : MSCRED_WGMMA_ACCUMULATORS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(static_cast<int>(accumulate)), "l"(desc));
#else
  __trap();  // built only where the kernel selects it: sm_90a (resident_lstm.cu's kWgmma)
#endif
}

// One 64-row tile's GEMM with the A fragments in registers (a[k16 step], mma.sync's A layout): KSTEPS wgmma over B's
// k16 steps 4,096 bytes apart from `b_base` (wgmma_desc's layout: k halves 2,048 bytes apart, 8-column groups 128),
// into acc (overwritten), waited for; A and acc kept in registers up to the wait (keep_in_registers).
template <int KSTEPS>
__device__ __forceinline__ void wgmma_tile(float (&acc)[16][4], uint32_t (&a)[KSTEPS][4], unsigned b_base) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) wgmma_m64n128k16(acc, a[ks], wgmma_desc(b_base + ks * 4096, 2048, 128), ks > 0);
  wgmma_commit();
  wgmma_wait_all();
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) keep_in_registers(a[ks][i]);
#pragma unroll
  for (int nt = 0; nt < 16; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) keep_in_registers(acc[nt][i]);
}

// Descriptor of an operand at shared address `addr` in the 128-byte-swizzle K-major layout: rows of 128 bytes (64
// bf16 k), 8-row atoms 1,024 bytes apart (the stride byte offset), chunk c of row r stored at chunk c ^ (r % 8) counted
// from a 1,024-byte boundary. `addr` may start at any row (and 32-byte k step) of such a buffer; `base_offset` (bits
// 49-51) is what the PTX ISA's descriptor table asks for a start off the atom's boundary, (addr >> 7) % 8, or 0 where
// the hardware swizzles by the absolute address (conv_cell.cu's MSCRED_CONV_CELL_BASE_OFFSET A/B says which).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(unsigned addr, bool base_offset) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) |
         (static_cast<uint64_t>(base_offset ? (addr >> 7) & 7 : 0) << 49) | (static_cast<uint64_t>(1) << 62);
}

// d (64 x 128, float32, as wgmma_m64n128k16's) = A (64 x 16 bf16 at descriptor `a_desc`, shared memory) x B (16 x
// 128 bf16 at `b_desc`) + (accumulate ? d : 0).
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[16][4], uint64_t a_desc, uint64_t b_desc,
                                                    bool accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : MSCRED_WGMMA_ACCUMULATORS(d)
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#else
  __trap();  // built only where a kernel selects it: sm_90a
#endif
}

// The 32 float32 accumulators of an m64n64 wgmma as inline-asm operands %0-%31 (this thread's d[8][4]).
#define MSCRED_WGMMA_ACCUMULATORS_N64(d)                                                                              \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),            \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),        \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),        \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),        \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])

// d (64 x 64, float32; this warp's 16 rows as d[n8 tile][4]) = A (64 x 16 bf16 at descriptor `a_desc`, shared
// memory) x B (16 x 64 bf16 at `b_desc`) + (accumulate ? d : 0).
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[8][4], uint64_t a_desc, uint64_t b_desc,
                                                   bool accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : MSCRED_WGMMA_ACCUMULATORS_N64(d)
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#else
  __trap();  // built only where a kernel selects it: sm_90a
#endif
}

}  // namespace mscred_resident
