// conv_patch_pad: the implicit GEMM for 2 x 2, stride-2 patches of an odd-sized input (conv3 at n = 30: 15 x 15 ->
// 8 x 8, TF "same" padding only the bottom row and right column). Part of the im2col extension: im2col.cu includes
// it (see the overview there).
#pragma once

#include <cstdint>

#include "im2col.h"
#include "patch.cuh"

namespace mscred_im2col {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Why a kernel of its own: conv3 moves 46 FLOP per byte, below the roofline's ridge (~84): memory-bound, and the
// generic kernel (conv_pipelined), which gathers every tap through a table with a 4-byte copy and a mask test,
// reached 0.30 of the copy bandwidth there (0.0449 ms graph-timed, 3.05x cuDNN + SELU). conv_patch (patch.cuh)
// copies whole channel planes as they are and picks the im2col order in its fragment loads, but needs an input of
// exactly 2 HO x 2 WO; conv3's is one row and one column short. Here:
//   * a pixel tile is IMGS whole images and a K-step 8 whole channels of each, and since 8 channel planes of an
//     image are one contiguous run of 8 x 225 floats in x (16-byte aligned when C % 4 == 0), a stage copies each
//     image's run as it is, by 16-byte cp.async, into a dense block of shared memory: no table, no mask, no
//     per-element copy; all 128 output channels in one tile, so x is read once;
//   * the fragments are conv_patch's (A by ldmatrix in W's natural k order; B's b0/b1 tap t of channels 2kb and
//     2kb + 1 of the lane's pixel, two 4-byte loads, planes 225 words apart), with the B values of a tap on the
//     missing row or column (output row or column 7, second tap) counted as zero by a per-lane, per-n-block mask
//     bit (patch_stage_mma's MASKED) and their address clamped to the last row / column (a word another lane of the
//     load reads); the B loads of an n-block are one output row: words i*15 + 2g + j, 31 distinct banks (the 15 of
//     i = 0, j = 1, g = 7 and i = 1, j = 0, g = 0 is one word, a broadcast);
//   * the epilogue is conv_patch's (bias, SELU, 8-byte stores straight from the accumulators).
// The layout and its index arithmetic are replayed on the CPU by tests/test_conv3_patch_layout.py (outputs against
// float64, the mask, the banks). Measured on the H200 (harness, batch 640, results/candidates_1130/probe.txt):
// 0.0314 ms with 5-image tiles of 128 x 320 (one wave), 0.0372 with 1-image tiles of 128 x 64 (2 blocks per SM),
// against 0.0428 for the generic kernel; the 1-image tile wins at every batch below ~530 (e.g. 132: 0.0133 against
// 0.0146 and 0.0287 for the 5-image tile).
// ---------------------------------------------------------------------------------------------------------------
template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int HO, int WO>
struct PadPatchTile {
  static constexpr int WARPS_N = 8 / WARPS_M, THREADS = 256;
  static constexpr int BM = WARPS_M * MT * 16, BN = WARPS_N * NT * 8;
  static constexpr int H = 2 * HO - 1, W = 2 * WO - 1, HW = H * W, P = HO * WO;
  static constexpr int CK = 8;                           // channels per K-step: BK = 4 * CK = 32
  static constexpr int LDA = 4 * CK + 4;                 // = 4 mod 32: conflict-free ldmatrix
  static constexpr int PS = HW;                          // planes dense, as in x (patch_stage_mma's plane stride)
  static constexpr int IMG_WORDS = CK * HW;              // an image's K-step block
  static constexpr int A_WORDS = BM * LDA, B_WORDS = IMGS * IMG_WORDS, STAGE_WORDS = A_WORDS + B_WORDS;
  static constexpr size_t SMEM_BYTES = (size_t)STAGES * STAGE_WORDS * 4;
  static_assert(BN == IMGS * P && P % 8 == 0, "a pixel tile is IMGS whole images, n8-blocks within one image");
  static_assert(IMG_WORDS % 4 == 0 && A_WORDS % 4 == 0, "16-byte copies");
};

template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int MIN_BLOCKS, int HO, int WO>
__global__ void __launch_bounds__(256, MIN_BLOCKS)
    conv_patch_pad(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                   float* __restrict__ y, ConvShape s, bool apply_selu) {
  using T = PadPatchTile<WARPS_M, MT, NT, IMGS, STAGES, HO, WO>;
  constexpr int BM = T::BM, LDA = T::LDA, HW = T::HW, CK = T::CK, P = T::P, H = T::H, W = T::W;
  constexpr int A_CHUNKS = BM * CK;                      // 16-byte weight chunks per K-step: BM rows of 4*CK weights
  constexpr int IMG_CHUNKS = T::IMG_WORDS / 4, B_CHUNKS = IMGS * IMG_CHUNKS;
  static_assert(A_CHUNKS % 256 == 0, "weight chunks spread evenly over the threads");
  extern __shared__ __align__(16) uint32_t smem[];
  const int C = s.C, K = 4 * C, O = s.O, N = s.N;
  const int ksteps = C / CK;  // host: C % CK == 0
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
  const int o0 = blockIdx.y * BM, n0 = blockIdx.x * IMGS;

  auto load_stage = [&](int ks, int slot) {
    uint32_t* As = smem + slot * T::STAGE_WORDS;
    uint32_t* Bs = As + T::A_WORDS;
#pragma unroll
    for (int r = 0; r < A_CHUNKS / 256; ++r) {
      const int e = tid + 256 * r, row = e / CK, q = e % CK;
      const bool ok = o0 + row < O;
      cp_async16(As + row * LDA + 4 * q, w + (ok ? (int64_t)(o0 + row) * K + ks * 4 * CK + 4 * q : 0), ok);
    }
#pragma unroll
    for (int r = 0; r < (B_CHUNKS + 255) / 256; ++r) {
      const int e = tid + 256 * r;
      if (B_CHUNKS % 256 != 0 && e >= B_CHUNKS) continue;
      const int img = e / IMG_CHUNKS, q = e - img * IMG_CHUNKS;
      const bool ok = n0 + img < N;  // images past the batch: zero-filled, never stored
      cp_async16(Bs + img * T::IMG_WORDS + 4 * q, x + (ok ? ((int64_t)(n0 + img) * C + ks * CK) * HW + 4 * q : 0),
                 ok);
    }
  };

  // Fragment offsets (conv_patch's LDSM_A order): A rows by ldmatrix; B for n-block j: the lane's pixel g, tap t
  // (row i = t / 2, column j = t % 2 of the patch), channel 2kb (+1) at + (2kb (+1)) * HW. A tap on the missing row
  // or column is masked (bit j of b_valid clear) and its address clamped to the last row / column: the word another
  // lane of the same load reads (a broadcast; clamped to the block's first word it hit a bank another lane used).
  const int g = lane / 4, t = lane % 4, mat = lane / 8;
  const int a_off = (warp_m * MT * 16 + lane % 8 + (mat & 1) * 8) * LDA + (mat >> 1) * 4;
  int b_off[NT];
  uint32_t b_valid = 0;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int nb = warp_n * NT + j, img = nb / (P / 8), p = (nb % (P / 8)) * 8 + g, ho = p / WO, wo = p % WO;
    const int row = 2 * ho + t / 2, col = 2 * wo + t % 2;
    const bool inside = row < H && col < W;
    b_off[j] = img * T::IMG_WORDS + (row < H ? row : H - 1) * W + (col < W ? col : W - 1);
    b_valid |= (inside ? 1u : 0u) << j;
  }

  float acc[MT][NT][4];
  zero_accumulators(acc);
  cp_async_k_loop<STAGES>(ksteps, load_stage, [&](int slot) {
    const uint32_t* As = smem + slot * T::STAGE_WORDS;
    patch_stage_mma<T, MT, NT, true, true>(acc, As, As + T::A_WORDS, a_off, b_off, b_valid);
  });
  patch_epilogue<MT, NT, P>(acc, y, bias, O, N, o0 + warp_m * MT * 16, n0, warp_n * NT, lane, apply_selu);
}

}  // namespace
}  // namespace mscred_im2col
