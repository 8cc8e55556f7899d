// Inference through one ConvLSTM level with the window's whole state resident on the SM (window_lstm_resident).
//
// The Triton per-window kernel (ops/triton/convlstm_window.py) carries a window through its steps but reads h_{t-1}
// and c_{t-1} back through L2 / HBM, each program a chain of dependent loads (35% of the HBM peak at the scoring
// batch, results/window_lstm_ncu/). Here a block holds everything a window's recurrence touches on the chip:
//   the recurrent weight        (4Ch x 4Ch bf16, 32 KB at 32 channels, 128 KB at 64) in shared memory, loaded once
//                               per block (the grid is persistent: one block per SM takes window after window);
//   h_{t-1} and h_t             two (H*W + 1) x Ch bf16 maps in shared memory (the extra row is zeros: the taps
//                               that fall in TF's "same" padding point at it);
//   c                           in shared memory too, float16 (as the per-step path keeps the cell of bf16
//                               inference, MSCRED_LSTM_HALF_CELL), in the MMA accumulator's layout: a warp owns
//                               the same pixel tiles at every step, and an accumulator element (pixel, gate
//                               column) sits in the same thread for the four gates of a channel, so the update
//                               is thread-local and each lane reads and writes its own slots (no bank conflicts).
//                               (In registers, 64 per thread at 32 channels, it took ptxas to 255 registers and
//                               spilled on sm_80.)
// So only the input gates come in (8 bytes per hidden element and step, and consecutive windows read the same
// segments' gates one step apart, so mostly from L2) and h goes out (2 bytes, 16-byte stores from the map).
//
// Per step, for each 16-pixel tile of a warp and each group of 32 hidden channels (a "unit", 128 gate columns):
// z = gx + bias (+ the recurrent convolution from t = 1: one GEMM (16 x 4Ch) x (4Ch x 128) over the 2 x 2 taps on
// mma.sync m16n8k16 bf16, A fragments gathered from the h map by ldmatrix with per-lane tap addresses, B from the
// weight), rounded to bf16 as the per-step path stores its gates, then the cell update and h into the other map.
// The next unit's input gates are loaded before this unit's MMAs so that their latency overlaps them.
//
// Sizes it takes (checked by the host): Ch 32 with H*W <= 1024 (level 1 of the default model: 30 x 30) and Ch 64
// with H*W <= 256 (level 2: 15 x 15), kernel 2 x 2, bf16. The activations use tanh.approx (sigmoid(z) =
// (1 + tanh(z/2)) / 2): one MUFU op each, ~2^-11 relative error, under the bf16 rounding of the gates and of h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "resident_lstm.h"

namespace mscred_resident {
namespace {

#ifndef MSCRED_RESIDENT_WARPS
#define MSCRED_RESIDENT_WARPS 8  // warps per block (A/B switch, as the two above)
#endif
constexpr int kWarps = MSCRED_RESIDENT_WARPS;
constexpr int kThreads = kWarps * 32;

__device__ __forceinline__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float sigmoid_fast(float x) { return fmaf(0.5f, tanh_fast(0.5f * x), 0.5f); }

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A/B switches of the epilogue (MSCRED_RESIDENT_LSTM_FLAGS adds -D flags to the build, benchmarks only):
//   MSCRED_RESIDENT_ROUND_GATES 1   round the pre-activations to bf16 first, as the per-step path stores its gates
//                                   (0: keep float32, one rounding fewer)
//   MSCRED_RESIDENT_HALF_TANH   0   the activations two at a time with tanh.approx.f16x2 (one MUFU op per pair)
#ifndef MSCRED_RESIDENT_ROUND_GATES
#define MSCRED_RESIDENT_ROUND_GATES 1
#endif
#ifndef MSCRED_RESIDENT_HALF_TANH
#define MSCRED_RESIDENT_HALF_TANH 0
#endif

__device__ __forceinline__ float2 gate_pair(float a, float b) {
#if MSCRED_RESIDENT_ROUND_GATES
  return __bfloat1622float2(__floats2bfloat162_rn(a, b));
#else
  return make_float2(a, b);
#endif
}

__device__ __forceinline__ float2 tanh2(float2 v) {
#if MSCRED_RESIDENT_HALF_TANH
  __half2 h = __floats2half2_rn(v.x, v.y);
  uint32_t u;
  memcpy(&u, &h, 4);
  asm("tanh.approx.f16x2 %0, %0;" : "+r"(u));
  memcpy(&h, &u, 4);
  return __half22float2(h);
#else
  return make_float2(tanh_fast(v.x), tanh_fast(v.y));
#endif
}

__device__ __forceinline__ float2 sigmoid2(float2 v) {
  const float2 t = tanh2(make_float2(0.5f * v.x, 0.5f * v.y));
  return make_float2(fmaf(0.5f, t.x, 0.5f), fmaf(0.5f, t.y, 0.5f));
}

__device__ __forceinline__ float2 bf16x2_to_float2(uint32_t v) {
  __nv_bfloat162 h;
  memcpy(&h, &v, 4);
  return __bfloat1622float2(h);
}

__device__ __forceinline__ uint32_t float2_to_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  uint32_t v;
  memcpy(&v, &h, 4);
  return v;
}

// The 16-byte chunk of a map row (pixel) that chunk c is stored at: XOR-swizzled by the pixel so that the eight rows
// of an ldmatrix (eight consecutive pixels, or the zero row) fall in distinct bank groups.
template <int CHUNKS>
__device__ __forceinline__ int h_chunk(int pixel, int c) {
  static_assert(CHUNKS == 4 || CHUNKS == 8, "maps of 32 or 64 channels");
  return c ^ ((pixel / (8 / CHUNKS)) % CHUNKS);
}

template <int CH>
__global__ void __launch_bounds__(kThreads, 1) window_lstm_resident(ResidentParams p) {
  constexpr int G4 = 4 * CH;          // gate columns (n): blocks i, g, f, o of CH each
  constexpr int K = 4 * CH;           // 2 x 2 taps x CH input channels, k = (ky * 2 + kx) * CH + ci
  constexpr int W_CHUNKS = K / 8;     // 16-byte chunks of a weight row
  constexpr int H_CHUNKS = CH / 8;    // 16-byte chunks of a map row
  constexpr int GROUPS = CH / 32;     // 32-channel groups: a unit's 128 gate columns are 16 n8 tiles
  constexpr int TAP_STEPS = CH / 16;  // k16 steps per tap

  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* w_s = reinterpret_cast<__nv_bfloat16*>(smem);  // [G4][K], chunks swizzled by n & 7
  float* bias_s = reinterpret_cast<float*>(w_s + G4 * K);        // [G4]
  __nv_bfloat16* maps = reinterpret_cast<__nv_bfloat16*>(bias_s + G4);
  const int HW = p.H * p.W;
  const int map_elems = (HW + 1) * CH;  // + the zero row at pixel HW
  __half2* cells = reinterpret_cast<__half2*>(maps + 2 * map_elems);  // [tile][group][q][half][lane]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < G4 * W_CHUNKS; i += kThreads) {
    const int n = i / W_CHUNKS, c = i % W_CHUNKS;
    const uint4 v = *reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(n) * K + c * 8);
    *reinterpret_cast<uint4*>(w_s + n * K + (c ^ (n & 7)) * 8) = v;
  }
  for (int i = tid; i < G4; i += kThreads) bias_s[i] = p.bias[i];
  for (int i = tid; i < 2 * CH; i += kThreads) {
    (i < CH ? maps : maps + map_elems)[HW * CH + i % CH] = __float2bfloat16_rn(0.f);
  }
  __syncthreads();

  const int tiles = (HW + 15) / 16;
  const int quad = lane >> 2, pair = 2 * (lane & 3);  // accumulator row (and row + 8), first of two columns

  // Input gates of one unit, as bf16 pairs in the accumulator layout: [gate j * 4 + n8 tile q][row, row + 8].
  auto load_gates = [&](uint32_t (&g)[16][2], long long b, int t, int tile, int group) {
    const __nv_bfloat16* base = p.gx + b * p.gx_sb + t * p.gx_st;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int pix = tile * 16 + quad + 8 * half;
      const bool ok = tile < tiles && pix < HW;
      const int y = ok ? pix / p.W : 0, x = ok ? pix - y * p.W : 0;
      const __nv_bfloat16* row = base + y * p.gx_sy + x * p.gx_sx + group * 32 + pair;
#pragma unroll
      for (int nt = 0; nt < 16; ++nt) {
        g[nt][half] = ok ? __ldg(reinterpret_cast<const unsigned*>(row + (nt >> 2) * CH + (nt & 3) * 8)) : 0u;
      }
    }
  };

  uint32_t gates[16][2];
  long long b = blockIdx.x;
  load_gates(gates, b, 0, warp, 0);
  int step = 0;  // steps done by this block: the map written at a step is maps[step & 1]
  for (; b < p.B; b += gridDim.x) {
    for (int t = 0; t < p.T; ++t, ++step) {
      __nv_bfloat16* h_out = maps + (step & 1) * map_elems;
      const __nv_bfloat16* h_in = maps + ((step + 1) & 1) * map_elems;
      for (int tile = warp; tile < tiles; tile += kWarps) {
#pragma unroll 1
        for (int group = 0; group < GROUPS; ++group) {
          // z = gx + bias, then the next unit's gates are loaded (in flight during this unit's MMAs).
          float acc[16][4];
#pragma unroll
          for (int nt = 0; nt < 16; ++nt) {
            const int col = (nt >> 2) * CH + group * 32 + (nt & 3) * 8 + pair;
            const float2 bs = *reinterpret_cast<const float2*>(bias_s + col);
            const float2 lo = bf16x2_to_float2(gates[nt][0]), hi = bf16x2_to_float2(gates[nt][1]);
            acc[nt][0] = lo.x + bs.x;
            acc[nt][1] = lo.y + bs.y;
            acc[nt][2] = hi.x + bs.x;
            acc[nt][3] = hi.y + bs.y;
          }
          if (group + 1 < GROUPS) {
            load_gates(gates, b, t, tile, group + 1);
          } else if (tile + kWarps < tiles) {
            load_gates(gates, b, t, tile + kWarps, 0);
          } else if (t + 1 < p.T) {
            load_gates(gates, b, t + 1, warp, 0);
          } else if (b + gridDim.x < p.B) {
            load_gates(gates, b + gridDim.x, 0, warp, 0);
          }
          if (t > 0) {
            // The A rows this lane addresses for ldmatrix: pixel tile * 16 + r, its four taps' source pixels
            // (HW, the zero row, outside the image or past the last pixel).
            const int r = (lane & 7) + ((lane >> 3) & 1) * 8, khalf = lane >> 4;
            const int pix = tile * 16 + r;
            const int y = pix / p.W, x = pix - y * p.W;
            int src[4];
#pragma unroll
            for (int tap = 0; tap < 4; ++tap) {
              const int sy = y + (tap >> 1) - p.pad_t, sx = x + (tap & 1) - p.pad_l;
              src[tap] = (pix < HW && sy >= 0 && sy < p.H && sx >= 0 && sx < p.W) ? sy * p.W + sx : HW;
            }
            // B rows: lane's matrix m = lane >> 3 is (n8 tile 2np + (m >> 1), k half m & 1), its row lane & 7.
            const int bm = lane >> 3, brow = lane & 7;
#pragma unroll
            for (int tap = 0; tap < 4; ++tap) {
#pragma unroll
              for (int ts = 0; ts < TAP_STEPS; ++ts) {
                const int kstep = tap * TAP_STEPS + ts;
                uint32_t a[4];
                ldmatrix_x4(smem_u32(h_in + src[tap] * CH + h_chunk<H_CHUNKS>(src[tap], ts * 2 + khalf) * 8),
                            a[0], a[1], a[2], a[3]);
#pragma unroll
                for (int np = 0; np < 8; ++np) {
                  const int nt = 2 * np + (bm >> 1);
                  const int n = (nt >> 2) * CH + group * 32 + (nt & 3) * 8 + brow;
                  const int kc = kstep * 2 + (bm & 1);
                  uint32_t b0, b1, b2, b3;
                  ldmatrix_x4(smem_u32(w_s + n * K + (kc ^ brow) * 8), b0, b1, b2, b3);
                  mma_bf16(acc[2 * np], a, b0, b1);
                  mma_bf16(acc[2 * np + 1], a, b2, b3);
                }
              }
            }
          }
          // The cell update: gate j of channel (group * 32 + q * 8 + pair + e % 2) is acc[j * 4 + q][e]; this
          // lane's c of those channels is its own slot of the unit's cell block.
          __half2* c_slot = cells + (tile * GROUPS + group) * 8 * 32 + lane;
#pragma unroll
          for (int q = 0; q < 4; ++q) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const float2 c_prev = t > 0 ? __half22float2(c_slot[(q * 2 + half) * 32]) : make_float2(0.f, 0.f);
              const int k = 2 * half;  // this row's two channels: accumulator elements k, k + 1
              const float2 zi = gate_pair(acc[q][k], acc[q][k + 1]), zg = gate_pair(acc[4 + q][k], acc[4 + q][k + 1]);
              const float2 zf = gate_pair(acc[8 + q][k], acc[8 + q][k + 1]);
              const float2 zo = gate_pair(acc[12 + q][k], acc[12 + q][k + 1]);
              const float2 si = sigmoid2(zi), tg = tanh2(zg), so = sigmoid2(zo);
              float c_new[2] = {si.x * tg.x, si.y * tg.y};
              if (t > 0) {
                const float2 sf = sigmoid2(make_float2(zf.x + p.forget_bias, zf.y + p.forget_bias));
                c_new[0] = fmaf(sf.x, c_prev.x, c_new[0]);
                c_new[1] = fmaf(sf.y, c_prev.y, c_new[1]);
              }
              const float2 tc = tanh2(make_float2(c_new[0], c_new[1]));
              const float h2[2] = {so.x * tc.x, so.y * tc.y};
              c_slot[(q * 2 + half) * 32] = __floats2half2_rn(c_new[0], c_new[1]);
              const int pix = tile * 16 + quad + 8 * half;
              if (pix < HW) {
                const int chunk = h_chunk<H_CHUNKS>(pix, group * 4 + q);
                *reinterpret_cast<uint32_t*>(h_out + pix * CH + chunk * 8 + pair) = float2_to_bf16x2(h2[0], h2[1]);
              }
            }
          }
        }
      }
      __syncthreads();  // h_t complete: the next step reads it, and it is copied out now
      __nv_bfloat16* dst = p.out + b * p.out_sb + static_cast<long long>(t) * p.out_st;
      for (int i = tid; i < HW * H_CHUNKS; i += kThreads) {
        const int pix = i / H_CHUNKS, c = i % H_CHUNKS;
        const uint4 v = *reinterpret_cast<const uint4*>(h_out + pix * CH + h_chunk<H_CHUNKS>(pix, c) * 8);
        *reinterpret_cast<uint4*>(dst + pix * CH + c * 8) = v;
      }
      // The map written next step (maps[(step + 1) & 1]) was last read before the barrier above: no second one.
    }
  }
}

template <int CH>
cudaError_t launch(const ResidentParams& p, int sms, cudaStream_t stream) {
  const int HW = p.H * p.W;
  const size_t smem = shared_bytes(CH, HW);
  auto kernel = window_lstm_resident<CH>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const int grid = p.B < sms ? p.B : sms;
  kernel<<<grid, kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

size_t shared_bytes(int ch, int hw) {
  const size_t tiles = (hw + 15) / 16;
  return sizeof(__nv_bfloat16) * (16 * ch * ch + 2 * (hw + 1) * ch) + sizeof(float) * 4 * ch +
         sizeof(__half2) * tiles * (ch / 32) * 8 * 32;
}

cudaError_t window_lstm_resident_forward(const ResidentParams& p, int ch, int sms, cudaStream_t stream) {
  if (p.B <= 0 || p.T <= 0) return cudaSuccess;
  if (ch == 32 && p.H * p.W <= kMaxPixels32) return launch<32>(p, sms, stream);
  if (ch == 64 && p.H * p.W <= kMaxPixels64) return launch<64>(p, sms, stream);
  return cudaErrorInvalidValue;
}

}  // namespace mscred_resident
