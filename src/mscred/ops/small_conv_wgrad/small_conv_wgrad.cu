// conv1's weight gradient (3 -> 32 channels, 3 x 3, + bias, SELU): dW = patches^T . dz over all N*H*W pixels.
//
// Why not the Triton kernel (ops/triton/small_conv.py): it is bound by its issue slots -- ~5,000 warp instructions
// a 128-pixel tile, at 8 resident warps an SM (189 registers), 0.56 issued a cycle per scheduler
// (results/small_conv_wgrad_ncu/, results/small_conv_wgrad_stalls/): 62-65 us for 114 MB, ~1.8 TB/s. Here:
//   * one thread a pixel: its 32 channels of dout, the second gradient and the output come as 16-byte loads (12),
//     dz in float32 (the two gradients summed in bf16, as autograd sums them), stored transposed (dz^T [co][pixel])
//     in shared memory; its 27 patch values (zero outside the image) and the bias's 1 into patches^T [k][pixel];
//   * each warp multiplies its 32 pixels of the tile: C (32 k x 32 co) += A (32 x 32 pixels) . B (32 pixels x 32),
//     mma.sync m16n8k16 bf16 -> float32, fragments read as 32-bit pairs along the pixels (rows padded by 8 elements:
//     the 8 row groups x 4 pairs of a fragment load land on 32 different banks);
//   * blocks persistent over the tiles; at the end the 4 warps' accumulators are summed in shared memory and added
//     to dW / db once per block (float32 atomics).
#include "small_conv_wgrad.h"

#include <cuda_bf16.h>

namespace mscred_small_conv {
namespace {

constexpr float kSeluScale = 1.0507009873554804934193349852946f;
constexpr float kSeluScaleAlpha = 1.0507009873554804934193349852946f * 1.6732632423543772848170429916717f;
constexpr int kRowPad = kThreads + 8;  // elements a shared row: 128 pixels + 8

__device__ __forceinline__ uint32_t pair(const __nv_bfloat16* row, int col) {
  return *reinterpret_cast<const uint32_t*>(row + col);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// dz of 8 channels (one 16-byte chunk) of one pixel into dz^T's column `pixel`.
__device__ __forceinline__ void dz_chunk(const WgradParams& p, int64_t g_at, int64_t g2_at, int64_t o_at, int c0,
                                         __nv_bfloat16 (*dzt)[kRowPad], int pixel) {
  uint4 gv = *reinterpret_cast<const uint4*>(p.g + g_at + c0);
  const __nv_bfloat16* gs = reinterpret_cast<const __nv_bfloat16*>(&gv);
  uint4 g2v = make_uint4(0, 0, 0, 0), ov = make_uint4(0, 0, 0, 0);
  if (p.g2) g2v = *reinterpret_cast<const uint4*>(p.g2 + g2_at + c0);
  if (p.o) ov = *reinterpret_cast<const uint4*>(p.o + o_at + c0);
  const __nv_bfloat16* g2s = reinterpret_cast<const __nv_bfloat16*>(&g2v);
  const __nv_bfloat16* os = reinterpret_cast<const __nv_bfloat16*>(&ov);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    float d = __bfloat162float(p.g2 ? __hadd(gs[j], g2s[j]) : gs[j]);
    if (p.o) {
      float out = __bfloat162float(os[j]);
      d *= out > 0.f ? kSeluScale : out + kSeluScaleAlpha;
    }
    dzt[c0 + j][pixel] = __float2bfloat16_rn(d);
  }
}

__global__ void __launch_bounds__(kThreads, kBlocksPerSM) wgrad_kernel(const WgradParams p) {
  __shared__ __align__(16) __nv_bfloat16 at[32][kRowPad];   // patches^T: [k][pixel]
  __shared__ __align__(16) __nv_bfloat16 dzt[32][kRowPad];  // dz^T: [co][pixel]
  __shared__ float sums[kThreads / 32][32][33];             // the warps' accumulators, summed at the end

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, grp = lane / 4, tig = lane % 4;
  const int64_t hw = int64_t(p.H) * p.W, pixels = hw * p.N;
  const int64_t tiles = (pixels + kThreads - 1) / kThreads;
  float acc[2][4][4] = {};  // [k tile of 16][co tile of 8][fragment]

  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t q = tile * kThreads + tid;
    const bool valid = q < pixels;
    const int64_t b = valid ? q / hw : 0;
    const int r = valid ? int(q - b * hw) : 0;
    const int y = r / p.W, x = r - (r / p.W) * p.W;
    if (valid) {
      const int64_t g_at = b * p.g_sb + y * p.g_sy + x * p.g_sx;
      const int64_t g2_at = b * p.g2_sb + y * p.g2_sy + x * p.g2_sx;
      const int64_t o_at = b * p.o_sb + y * p.o_sy + x * p.o_sx;
      for (int c0 = 0; c0 < p.CO; c0 += 8) dz_chunk(p, g_at, g2_at, o_at, c0, dzt, tid);
    } else {
      for (int c = 0; c < p.CO; ++c) dzt[c][tid] = __float2bfloat16_rn(0.f);
    }
    for (int c = p.CO; c < 32; ++c) dzt[c][tid] = __float2bfloat16_rn(0.f);
    const __nv_bfloat16* xb = p.x + b * p.x_sb;
#pragma unroll
    for (int ky = 0; ky < kKS; ++ky) {
      const int iy = y + ky - kKS / 2;
#pragma unroll
      for (int kx = 0; kx < kKS; ++kx) {
        const int ix = x + kx - kKS / 2;
        const bool inside = valid && iy >= 0 && iy < p.H && ix >= 0 && ix < p.W;
#pragma unroll
        for (int ci = 0; ci < kCI; ++ci) {
          at[(ky * kKS + kx) * kCI + ci][tid] =
              inside ? xb[ci * p.x_sc + iy * p.x_sy + ix * p.x_sx] : __float2bfloat16_rn(0.f);
        }
      }
    }
    at[kK][tid] = __float2bfloat16_rn(valid ? 1.f : 0.f);
#pragma unroll
    for (int k = kK + 1; k < 32; ++k) at[k][tid] = __float2bfloat16_rn(0.f);
    __syncthreads();
#pragma unroll
    for (int step = 0; step < 2; ++step) {  // this warp's 32 pixels, 16 at a time
      const int col = warp * 32 + step * 16 + 2 * tig;
      uint32_t a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        a[mt][0] = pair(at[mt * 16 + grp], col);
        a[mt][1] = pair(at[mt * 16 + grp + 8], col);
        a[mt][2] = pair(at[mt * 16 + grp], col + 8);
        a[mt][3] = pair(at[mt * 16 + grp + 8], col + 8);
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const uint32_t b0 = pair(dzt[nt * 8 + grp], col), b1 = pair(dzt[nt * 8 + grp], col + 8);
        mma_bf16(acc[0][nt], a[0], b0, b1);
        mma_bf16(acc[1][nt], a[1], b0, b1);
      }
    }
    __syncthreads();
  }
  // The four warps' C fragments into shared memory (row k, column co), summed, then added once per block.
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int k = mt * 16 + grp, co = nt * 8 + 2 * tig;
      sums[warp][k][co] = acc[mt][nt][0];
      sums[warp][k][co + 1] = acc[mt][nt][1];
      sums[warp][k + 8][co] = acc[mt][nt][2];
      sums[warp][k + 8][co + 1] = acc[mt][nt][3];
    }
  }
  __syncthreads();
  for (int e = tid; e < 32 * 32; e += kThreads) {
    const int k = e / 32, co = e % 32;
    if (k > kK || co >= p.CO) continue;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) s += sums[w][k][co];
    atomicAdd(k == kK ? p.db + co : p.dw + k * p.CO + co, s);
  }
}

}  // namespace

void launch_wgrad(const WgradParams& p, int sm_count, int blocks_per_sm, cudaStream_t stream) {
  const int64_t pixels = int64_t(p.N) * p.H * p.W;
  const int64_t tiles = (pixels + kThreads - 1) / kThreads;
  if (tiles == 0) return;
  const int64_t most = int64_t(sm_count) * (blocks_per_sm > 0 ? blocks_per_sm : kBlocksPerSM);
  const int blocks = int(tiles < most ? tiles : most);
  wgrad_kernel<<<blocks, kThreads, 0, stream>>>(p);
}

}  // namespace mscred_small_conv
