// Host-side interface of the im2col / GEMM / implicit-GEMM convolution kernels (im2col.cu).
//
// Everything is float32, NCHW, contiguous. A convolution is the GEMM
//     Y[o, q] = sum_k W[o, k] * col[k, q],   k = (c, i, j) over C x KH x KW,  q = (n, ho, wo) over N x Ho x Wo,
// with col[k, q] = x[n, c, ho*stride - pad_top + i, wo*stride - pad_left + j] (zero outside the image), and Y
// scattered back to NCHW. Bottom/right padding is implied by Ho and Wo, so TF "same" (asymmetric) padding is
// just (pad_top, pad_left, Ho, Wo) with the extra row/column at the bottom/right.
// Each launcher enqueues on `stream` and returns the launch's cudaError_t (cudaSuccess when it went in).
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

#ifdef __CUDACC__
#define MSCRED_HD __host__ __device__
#else
#define MSCRED_HD
#endif

namespace mscred_im2col {

struct ConvShape {
  int N, C, H, W;        // input
  int O, KH, KW;         // weight (O, C, KH, KW)
  int stride;
  int pad_top, pad_left;
  int Ho, Wo;            // output
  MSCRED_HD int K() const { return C * KH * KW; }
  MSCRED_HD int P() const { return Ho * Wo; }
  MSCRED_HD int NP() const { return N * Ho * Wo; }
};

// Which GEMM the explicit-im2col path uses: a plain one reading global memory, or the shared-memory tiled one.
enum class Gemm : int { Global = 0, Shared = 1 };

// ---- forward ----
// col (K, NP) <- im2col(x)
cudaError_t im2col(const float* x, float* col, const ConvShape& s, cudaStream_t stream);
// y (N, O, Ho, Wo) <- act(W (O, K) @ col (K, NP) + bias); bias may be null; act = SELU if selu.
cudaError_t gemm_forward(Gemm g, const float* w, const float* col, const float* bias, float* y,
                         const ConvShape& s, bool selu, cudaStream_t stream);
// y <- act(conv(x, W) + bias) without materialising col: TF32 tensor-core implicit GEMM (sm_80+).
cudaError_t implicit_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                             bool selu, cudaStream_t stream);

// The same, pipelined: table-driven gather, cp.async multi-stage K loop (see conv_pipelined in pipelined.cuh). Falls back
// to implicit_forward for shapes it does not take (> 32 taps per window, images of >= 2^30 elements).
cudaError_t implicit_pipelined_forward(const float* x, const float* w, const float* bias, float* y,
                                      const ConvShape& s, bool selu, cudaStream_t stream);

// ---- backward ----
// gz <- gy * SELU'(z), written from the saved output y (n elements).
cudaError_t selu_backward(const float* gy, const float* y, float* gz, int64_t n, cudaStream_t stream);
// gcol (K, NP) <- W^T (K, O) @ gz (O, NP as NCHW)
cudaError_t grad_col(Gemm g, const float* w, const float* gz, float* gcol, const ConvShape& s, cudaStream_t stream);
// gx (N, C, H, W) <- col2im(gcol): each input element gathers every column entry that copied it (no atomics).
cudaError_t col2im(const float* gcol, float* gx, const ConvShape& s, cudaStream_t stream);
// gw (O, K) += gz (O, NP as NCHW) @ col^T (NP, K); split over NP with atomics, so gw must start zeroed.
cudaError_t grad_weight(Gemm g, const float* gz, const float* col, float* gw, const ConvShape& s,
                        cudaStream_t stream);
// gb (O) += sum over n, ho, wo of gz; gb must start zeroed.
cudaError_t grad_bias(const float* gz, float* gb, const ConvShape& s, cudaStream_t stream);

}  // namespace mscred_im2col
