// Device helpers of the conv + cell step kernels (conv_cell.cu: the forward; conv_cell_bwd.cu: the backward).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "../resident_lstm/wgmma.h"

namespace mscred_conv_cell {
namespace {

// The warpgroup-MMA helpers both kernels use (ops/resident_lstm/wgmma.h).
using mscred_resident::fence_proxy_async_shared;
using mscred_resident::keep_in_registers;
using mscred_resident::wgmma_commit;
using mscred_resident::wgmma_desc;
using mscred_resident::wgmma_desc_sw128;
using mscred_resident::wgmma_fence;
using mscred_resident::wgmma_wait_all;

__device__ __forceinline__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float sigmoid_fast(float x) { return fmaf(0.5f, tanh_fast(0.5f * x), 0.5f); }

__device__ __forceinline__ unsigned smem_u32(const void* ptr) {
  return static_cast<unsigned>(__cvta_generic_to_shared(ptr));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
// 16 bytes from `src` if `copy`, else 16 zero bytes (cp.async's source size 0: nothing is read).
__device__ __forceinline__ void cp_async16_or_zero(unsigned dst, const void* src, bool copy) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(copy ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The warpgroup's own barrier (ids 1..3; 0 is __syncthreads').
__device__ __forceinline__ void warpgroup_barrier(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

__device__ __forceinline__ void store16(void* to, const uint4& v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(to), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ uint4 load16(const void* from) { return __ldg(reinterpret_cast<const uint4*>(from)); }

template <typename T>
__device__ __forceinline__ uint32_t bits(const T& pair) {
  uint32_t v;
  memcpy(&v, &pair, 4);
  return v;
}

// Two packed float16 / bf16 values (as `bits` makes them) back to float32.
__device__ __forceinline__ float2 half2_bits_to_float2(uint32_t v) {
  __half2 h;
  memcpy(&h, &v, 4);
  return __half22float2(h);
}

__device__ __forceinline__ float2 bf16x2_bits_to_float2(uint32_t v) {
  __nv_bfloat162 h;
  memcpy(&h, &v, 4);
  return __bfloat1622float2(h);
}

}  // namespace
}  // namespace mscred_conv_cell
