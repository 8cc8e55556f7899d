// im2col / col2im and the elementwise / reduction kernels of the backward pass (SELU backward, bias
// gradient).
// Part of the im2col extension: im2col.cu includes it (see the overview there).
#pragma once

#include <cstdint>

#include "im2col.h"
#include "device_math.cuh"

namespace mscred_im2col {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// im2col / col2im. One thread per element; q (the pixel) is the fastest index so that col rows are written and
// read coalesced.
// ---------------------------------------------------------------------------------------------------------------
__global__ void im2col_kernel(const float* __restrict__ x, float* __restrict__ col, ConvShape s) {
  const int64_t NP = s.NP();
  const int64_t total = NP * s.K();
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int k = (int)(e / NP);
    const int q = (int)(e - k * NP);
    const int c = k / (s.KH * s.KW), r = k - c * s.KH * s.KW, i = r / s.KW, j = r - i * s.KW;
    const int n = q / s.P(), p = q - n * s.P(), ho = p / s.Wo, wo = p - ho * s.Wo;
    const int h = ho * s.stride - s.pad_top + i, w = wo * s.stride - s.pad_left + j;
    float v = 0.f;
    if ((unsigned)h < (unsigned)s.H && (unsigned)w < (unsigned)s.W)
      v = __ldg(x + (((int64_t)n * s.C + c) * s.H + h) * s.W + w);
    col[e] = v;
  }
}

__global__ void col2im_kernel(const float* __restrict__ gcol, float* __restrict__ gx, ConvShape s) {
  const int64_t NP = s.NP();
  const int64_t total = (int64_t)s.N * s.C * s.H * s.W;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int w = (int)(e % s.W);
    const int h = (int)((e / s.W) % s.H);
    const int c = (int)((e / ((int64_t)s.W * s.H)) % s.C);
    const int n = (int)(e / ((int64_t)s.W * s.H * s.C));
    float acc = 0.f;
    for (int i = 0; i < s.KH; ++i) {
      const int hs = h + s.pad_top - i;  // = ho * stride when this tap came from output row ho
      if (hs < 0 || hs % s.stride) continue;
      const int ho = hs / s.stride;
      if (ho >= s.Ho) continue;
      for (int j = 0; j < s.KW; ++j) {
        const int ws = w + s.pad_left - j;
        if (ws < 0 || ws % s.stride) continue;
        const int wo = ws / s.stride;
        if (wo >= s.Wo) continue;
        const int k = (c * s.KH + i) * s.KW + j;
        acc += __ldg(gcol + k * NP + (int64_t)n * s.P() + ho * s.Wo + wo);
      }
    }
    gx[e] = acc;
  }
}

__global__ void selu_backward_kernel(const float* __restrict__ gy, const float* __restrict__ y,
                                     float* __restrict__ gz, int64_t n) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
    const float v = y[e];
    // y = scale*alpha*(exp(z)-1) for z <= 0, so dy/dz = scale*alpha*exp(z) = y + scale*alpha (as PyTorch's
    // elu_backward on the result).
    gz[e] = gy[e] * (v > 0.f ? kSeluScale : v + kSeluScale * kSeluAlpha);
  }
}

// gb[o] += sum over the images [blockIdx.y*chunk, ...) and their pixels of gz[n, o, :]; one block per (o, chunk).
__global__ void __launch_bounds__(256) grad_bias_kernel(const float* __restrict__ gz, float* __restrict__ gb,
                                                        ConvShape s, int chunk) {
  const int o = blockIdx.x;
  const int n0 = blockIdx.y * chunk, n1 = min(s.N, n0 + chunk);
  const int P = s.P();
  float acc = 0.f;
  for (int64_t e = threadIdx.x; e < (int64_t)(n1 - n0) * P; e += blockDim.x) {
    const int n = n0 + (int)(e / P), p = (int)(e % P);
    acc += gz[((int64_t)n * s.O + o) * P + p];
  }
  __shared__ float warp_sums[8];
  for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int i = 0; i < 8; ++i) t += warp_sums[i];
    atomicAdd(gb + o, t);
  }
}

}  // namespace
}  // namespace mscred_im2col
