// Inference through one ConvLSTM level with the window's whole state resident on the SM (window_lstm_resident).
//
// The Triton per-window kernel (ops/triton/convlstm_window.py) carries a window through its steps but reads h_{t-1}
// and c_{t-1} back through L2 / HBM, each program a chain of dependent loads (35% of the HBM peak at the scoring
// batch, results/window_lstm_ncu/). Here a block holds everything a window's recurrence touches on the chip:
//   the recurrent weight        (4Ch x 4Ch bf16, 32 KB at 32 channels, 128 KB at 64) in shared memory, loaded once
//                               per block (the grid is persistent: one block per SM takes window after window);
//   h_{t-1} and h_t             two (H*W + 2) x Ch bf16 maps in shared memory (row H*W is zeros: the taps that
//                               fall in TF's "same" padding point at it; row H*W + 1 takes the stores of the pixels
//                               past the last of a tile, so that no store needs a branch);
//   c                           in shared memory too, float16 (as the per-step path keeps the cell of bf16
//                               inference, MSCRED_LSTM_HALF_CELL), in the MMA accumulator's layout: a warp owns
//                               the same pixel tiles at every step, and an accumulator element (pixel, gate
//                               column) sits in the same thread for the four gates of a channel, so the update
//                               is thread-local and each lane reads and writes its own 16-byte slots. (In
//                               registers, 64 per thread at 32 channels, it took ptxas to 255 registers and
//                               spilled on sm_80.)
// So only the input gates come in (8 bytes per hidden element and step, and consecutive windows read the same
// segments' gates one step apart, so mostly from L2) and h goes out (2 bytes, 16-byte stores from the map). With
// ResidentParams::attn the level's temporal attention is finished here too (`attend`, after a window's last step):
// then only the attention output goes out, h_1 .. h_{T-2} passing through a scratch slot the block reuses.
//
// Per step, for each 16-pixel tile of a warp and each group of 32 hidden channels (a "unit", 128 gate columns):
// the unit's input gates are loaded (16 bytes per lane, row and gate), the recurrent convolution from t = 1 is one
// GEMM (16 x 4Ch) x (4Ch x 128) over the 2 x 2 taps on mma.sync m16n8k16 bf16 (A fragments gathered from the h map
// by ldmatrix with per-lane tap addresses, B from the weight), and the epilogue adds the input gates and the bias,
// updates c and writes h into the other map. The MMA columns are permuted ("lane order", below) so that a lane's
// accumulator columns are 8 consecutive channels of each gate. On sm_90a (MSCRED_RESIDENT_WGMMA, the default) the
// GEMM runs on warpgroup MMAs instead: four warps' tiles as one 64-pixel unit, the weight read by the tensor cores
// from shared memory (wgmma.h), the accumulators in the same per-warp layout, so the update is the same code.
//
// Measured on the H200 (results/resident_round4/, each level alone at the scoring batch of 3,591 windows, with the
// shared input convolution): level 1 (32 channels, 30 x 30) 3.02 ms, level 2 (64, 15 x 15) 2.19 ms, against 5.09 /
// 2.64 ms on the per-step path (and 4.64 / 3.77 ms for the Triton per-window kernel in round 3); whole-model graphed
// scoring 9.22x the eager baseline (7.70x without this kernel, results/resident_round3/). Nsight Compute (round 2):
// the tensor pipe ~25% busy, issue ~41%; the warps wait mostly on ldmatrix / MUFU results (short scoreboard) and
// fixed-latency dependencies, with 8-12 warps per SM. With the attention fused, the warpgroup MMAs and the map rows
// by a float multiply (results/float_rows/): level 1 2.75-2.76 ms, level 2 1.77-1.78 ms with their attention;
// whole model 10.89-10.93x.
//
// Sizes it takes (checked by the host): Ch 32 with H*W <= 1024 (level 1 of the default model: 30 x 30) and Ch 64
// with H*W <= 256 (level 2: 15 x 15), kernel 2 x 2, bf16, where the block's shared memory (shared_bytes) fits the
// device: 206 KB and 218 KB for levels 1-2 at 30 sensors, so an H100/H200 (227 KB); an A100 (163 KB) takes smaller
// maps only. The activations use tanh.approx (sigmoid(z) =
// (1 + tanh(z/2)) / 2): one MUFU op each, ~2^-11 relative error, under the bf16 rounding of h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "resident_lstm.h"
#include "shared_allowance.h"
#include "wgmma.h"

namespace mscred_resident {
namespace {

// MSCRED_RESIDENT_PAIR 1 gives the recurrent steps' MMAs units of two 16-pixel tiles, so that each weight fragment
// read from shared memory feeds twice the MMAs (the warps mostly wait on those ldmatrix results, results/
// resident_round2/); it needs the accumulators of both tiles (128 registers), so it runs 8 warps on every level. An
// A/B switch as the two below; measured slower on level 1 at the scoring batch (3.34 against 3.01 ms; fewer warps
// to hide the latencies), whole model 9.02x against 9.19x (results/resident_pair/).
#ifndef MSCRED_RESIDENT_PAIR
#define MSCRED_RESIDENT_PAIR 0
#endif
constexpr int kPair = MSCRED_RESIDENT_PAIR ? 2 : 1;

// MSCRED_RESIDENT_WGMMA 1 (the default but with two-tile units) runs the recurrent steps' GEMM on Hopper's
// warpgroup MMA (wgmma.h): each warpgroup takes units of 64 pixels (four warps' 16-pixel tiles) and a group's 128
// gate columns, its B operand the weight in shared memory read by the tensor cores once per 64 pixels instead of
// ldmatrix'ed by every warp for its 16. Measured on the H200 (results/resident_wgmma/, each level with its
// attention at the scoring batch): level 1 2.86-2.92 against 3.33-3.34 ms, level 2 1.82 against 2.37-2.38 ms;
// whole-model scoring 10.67x against 9.77-9.78x. Where the build is not sm_90a (an A100) the mma.sync loop runs on
// 16-pixel tiles (kTileRound). 0 keeps mma.sync everywhere, an A/B switch as the ones below.
#ifndef MSCRED_RESIDENT_WGMMA
#define MSCRED_RESIDENT_WGMMA (!MSCRED_RESIDENT_PAIR)
#endif
#if MSCRED_RESIDENT_WGMMA && defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool kWgmma = true;
#else
constexpr bool kWgmma = false;
#endif
static_assert(!(MSCRED_RESIDENT_WGMMA && MSCRED_RESIDENT_PAIR), "wgmma units are 64 pixels already");
// Pixels the tiles are rounded up to: the cell state and the step-0 loop cover whole 64-pixel units with wgmma.
// Keyed to the build's target (MSCRED_SM90A, from cuda_target, in the host pass too: shared_bytes) so that a build
// for an A100 does not pay for the rounding (up to 6 KB of shared memory, its largest 64-channel map 84 -> 68
// pixels); a Hopper build without that define fails the assertion below instead of running short.
#if MSCRED_RESIDENT_WGMMA && defined(MSCRED_SM90A)
constexpr int kTileRound = 64;
#else
constexpr int kTileRound = 16;
#endif
static_assert(!kWgmma || kTileRound == 64, "wgmma units take whole 64-pixel tiles: build with -DMSCRED_SM90A");
__host__ __device__ constexpr int tiles_of(int hw) { return (hw + kTileRound - 1) / kTileRound * (kTileRound / 16); }

// Warps per block: 12 at 32 channels, 8 at 64, the faster of 8 and 12 for each level at the scoring batch on the
// H200 (results/resident_round2/: level 1 3.40 against 3.66 ms, level 2 2.43 against 2.56). 16 warps cap ptxas at
// 128 registers per thread and spill. MSCRED_RESIDENT_WARPS (an A/B switch, see below) sets one count for both.
template <int CH>
__host__ __device__ constexpr int warps_of() {
#ifdef MSCRED_RESIDENT_WARPS
  return MSCRED_RESIDENT_WARPS;
#else
  return CH == 32 && !MSCRED_RESIDENT_PAIR ? 12 : 8;
#endif
}


__device__ __forceinline__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

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

// MSCRED_RESIDENT_ROUND_GATES 1 rounds the pre-activations to bf16 before the activations, as the per-step path
// stores its gates; the default 0 keeps them in float32 (one rounding fewer: 2.0e-3 against 2.2e-3 relative error to
// float64 at batch 128, results/resident_variants/). An A/B switch, as MSCRED_RESIDENT_WARPS: the build takes -D
// flags from MSCRED_RESIDENT_LSTM_FLAGS (benchmarks only). (Activations two at a time on tanh.approx.f16x2 were
// measured too, same call: no faster, the MUFU pipe is not what bounds the kernel.)
#ifndef MSCRED_RESIDENT_ROUND_GATES
#define MSCRED_RESIDENT_ROUND_GATES 0
#endif

__device__ __forceinline__ float2 gate_pair(float a, float b) {
#if MSCRED_RESIDENT_ROUND_GATES
  return __bfloat1622float2(__floats2bfloat162_rn(a, b));
#else
  return make_float2(a, b);
#endif
}

__device__ __forceinline__ float2 tanh2(float2 v) { return make_float2(tanh_fast(v.x), tanh_fast(v.y)); }

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

__device__ __forceinline__ void bf16x8_to_floats(const uint4& v, float (&f)[8]) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 pair = bf16x2_to_float2(w[i]);
    f[2 * i] = pair.x;
    f[2 * i + 1] = pair.y;
  }
}

// MSCRED_RESIDENT_SCRATCH_HINT 1 marks the fused attention's scratch maps evict-last in L2 (store and load cache
// hints): between a map's store and its loads at the window's end the SMs stream ~30 MB of input gates through L2,
// and the epilogue's loads waited ~1.5 us a round, more like HBM's latency than L2's (results/
// lstm_attention_batched/). An A/B switch as the ones above.
#ifndef MSCRED_RESIDENT_SCRATCH_HINT
#define MSCRED_RESIDENT_SCRATCH_HINT 0
#endif

// MSCRED_RESIDENT_FOLD_SCORES 1 gathers the attention's scores during the last step's cell updates, each lane's h_T
// chunks dotted with h_{T-1} (shared memory) and the scratch maps (L2) as soon as they are computed, while the other
// warps' MMAs run: the epilogue then keeps only its second pass. An A/B switch as the ones above; measured slower
// (results/epilogue_variants/: level 1 3.62 against 3.33 ms, level 2 2.56 against 2.37 at the scoring batch; the
// last step's updates carry the scratch loads' latency instead of hiding it).
#ifndef MSCRED_RESIDENT_FOLD_SCORES
#define MSCRED_RESIDENT_FOLD_SCORES 0
#endif

// MSCRED_RESIDENT_WIDE_STORES 1 (the default) writes every 16-byte chunk to global memory with one 128-bit store:
// NVVM split the plain uint4 assignments of copy_map and the attention's output into four 4-byte stores each (64
// STG.E against 6 STG.E.128 in the sm_90a code, results/resident_sass/), four store instructions and L1/L2 requests
// where one does. An inline st.global.v4 (CUDA's __stwb came out as STG.E.128.STRONG.SM). 0 keeps the plain
// assignments, an A/B switch as the ones above.
#ifndef MSCRED_RESIDENT_WIDE_STORES
#define MSCRED_RESIDENT_WIDE_STORES 1
#endif

// A 16-byte chunk to global memory (16-byte aligned).
__device__ __forceinline__ void store_global16(void* to, const uint4& v) {
#if MSCRED_RESIDENT_WIDE_STORES
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(to), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#else
  *reinterpret_cast<uint4*>(to) = v;
#endif
}

__device__ __forceinline__ void store_scratch(void* to, const uint4& v) {
#if MSCRED_RESIDENT_SCRATCH_HINT
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(to), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w), "l"(policy)
               : "memory");
#else
  store_global16(to, v);
#endif
}

// A scratch map's chunk, through L2 (written by other threads of the block before a barrier).
__device__ __forceinline__ uint4 load_scratch(const void* from) {
#if MSCRED_RESIDENT_SCRATCH_HINT
  uint64_t policy;
  uint4 v;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("ld.global.cg.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(from), "l"(policy)
               : "memory");
  return v;
#else
  return __ldcg(reinterpret_cast<const uint4*>(from));
#endif
}

// MSCRED_RESIDENT_INT_ROWS 0 (the default) finds a pixel's row in the map by a float multiply, (pixel + 0.5) x 1/W
// truncated: exact for every pixel below 2^12 and W up to 1,024 with the correctly rounded reciprocal (rcp.rn;
// tests/test_resident_lstm.py checks both; the kernel's pixels stay below 2^11), where the integer division by the
// runtime width took a few times the instructions (the gate and tap addressing around it were ~10% of all the
// kernel executed, Nsight Compute, results/attention_ncu/). 1 keeps the integer division, an A/B switch as the
// ones above.
#ifndef MSCRED_RESIDENT_INT_ROWS
#define MSCRED_RESIDENT_INT_ROWS 0
#endif

// The 16-byte chunk of a map row (pixel) that chunk c is stored at: XOR-swizzled by the pixel so that the eight rows
// of an ldmatrix (eight consecutive pixels, or the zero row) fall in distinct bank groups.
template <int CHUNKS>
__device__ __forceinline__ int h_chunk(int pixel, int c) {
  static_assert(CHUNKS == 4 || CHUNKS == 8, "maps of 32 or 64 channels");
  return c ^ ((pixel / (8 / CHUNKS)) % CHUNKS);
}

template <int CH>
__global__ void __launch_bounds__(warps_of<CH>() * 32, 1) window_lstm_resident(ResidentParams p) {
  constexpr int kWarps = warps_of<CH>(), kThreads = kWarps * 32;
  static_assert(kWarps <= kMaxWarps, "the attention's per-warp partials are sized for kMaxWarps");
  constexpr int G4 = 4 * CH;          // gate columns (n): blocks i, g, f, o of CH each
  constexpr int KSTEPS = G4 / 16;     // k16 steps over K = 2 x 2 taps x CH, k = (ky * 2 + kx) * CH + ci
  constexpr int H_CHUNKS = CH / 8;    // 16-byte chunks of a map row
  constexpr int GROUPS = CH / 32;     // 32-channel groups: a unit's 128 gate columns are 16 n8 tiles
  constexpr int TAP_STEPS = CH / 16;  // k16 steps per tap

  // The weight as [k16 step][MMA column n][2 chunks of 8 k], the chunk swizzled by bit 2 of n: an ldmatrix of eight
  // consecutive columns then reads eight distinct bank groups, and every lane's address is its own constant plus a
  // compile-time offset (no address arithmetic in the MMA loop).
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* w_s = reinterpret_cast<__nv_bfloat16*>(smem);
  float* bias_s = reinterpret_cast<float*>(w_s + G4 * G4);  // [G4], real gate columns
  __nv_bfloat16* maps = reinterpret_cast<__nv_bfloat16*>(bias_s + G4);
  const int HW = p.H * p.W;
#if MSCRED_RESIDENT_INT_ROWS
  auto row_of = [&](int pixel) { return pixel / p.W; };
#else
  const float inv_w = 1.f / static_cast<float>(p.W);
  auto row_of = [&](int pixel) {  // pixel / W for 0 <= pixel < 2^12 (MSCRED_RESIDENT_INT_ROWS)
    return static_cast<int>((static_cast<float>(pixel) + 0.5f) * inv_w);
  };
#endif
  const int map_elems = (HW + 2) * CH;  // + the zero row at pixel HW, + a row the pixels past HW write to
  uint4* cells = reinterpret_cast<uint4*>(maps + 2 * map_elems);  // [unit][row half][lane]: 8 float16 c
  const int tiles = tiles_of(HW);  // 16-pixel tiles (with wgmma whole 64-pixel units: pixels past HW are masked)
  float* warp_scores = reinterpret_cast<float*>(cells + tiles * GROUPS * 2 * 32);  // [warp][step], the attention's

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // MMA column n = j * CH + group * 32 + q * 8 + c (gate j, n8 tile q, column c) holds hidden channel
  // group * 32 + (c / 2) * 8 + q * 2 + c % 2 (the "lane order"): a lane's accumulator columns c = 2 * (lane % 4) + e
  // of the four n8 tiles of a gate are then 8 consecutive channels, read and written 16 bytes at a time.
  for (int i = tid; i < KSTEPS * G4 * 2; i += kThreads) {
    const int ks = i / (G4 * 2), n = (i / 2) % G4, half = i % 2;
    if constexpr (kWgmma) {
      // wgmma's B: column n = group * 128 + j * 32 + q * 8 + c (a unit's 128 columns contiguous, in the order of
      // the accumulator's n8 tiles j * 4 + q) holds the lane-order channel of MMA column j * CH + group * 32 +
      // q * 8 + c below; stored as [group][k16 step][k half][column][8 k] (wgmma.h's core matrices).
      const int group = n / 128, j = (n % 128) / 32, q = (n % 32) / 8, c = n % 8;
      const int real = j * CH + group * 32 + (c / 2) * 8 + q * 2 + c % 2;
      const uint4 v = *reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(real) * G4 + ks * 16 + half * 8);
      *reinterpret_cast<uint4*>(w_s + (((group * KSTEPS + ks) * 2 + half) * 128 + n % 128) * 8) = v;
    } else {
      const int c = n % 8, real = (n / 32) * 32 + (c / 2) * 8 + ((n / 8) % 4) * 2 + c % 2;
      const uint4 v = *reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(real) * G4 + ks * 16 + half * 8);
      *reinterpret_cast<uint4*>(w_s + ((ks * G4 + n) * 2 + (half ^ ((n >> 2) & 1))) * 8) = v;
    }
  }
  if constexpr (kWgmma) fence_proxy_async_shared();  // the weight, before the barrier, for wgmma's reads
  for (int i = tid; i < G4; i += kThreads) bias_s[i] = p.bias[i];
  for (int i = tid; i < 2 * CH; i += kThreads) {
    (i < CH ? maps : maps + map_elems)[HW * CH + i % CH] = __float2bfloat16_rn(0.f);
  }
  __syncthreads();

  const int quad = lane >> 2, lane_ch = (lane & 3) * 8;  // accumulator row (and row + 8); first of 8 channels
  // This lane's B address for ldmatrix: matrix m = lane >> 3 is (n8 tile 2np + (m >> 1), k half m & 1), row lane & 7.
  const int brow = lane & 7, bm = lane >> 3;
  const unsigned b_lane = smem_u32(w_s) + ((bm >> 1) * 8 + brow) * 32 + (((bm & 1) ^ (brow >> 2)) * 16);

  // The input gates of a unit (tile, group) of one step, for each row half and gate the lane's 8 channels. Pixels
  // past the last are loaded as the last one and zeroed by selects (no branch per load).
  auto load_gates = [&](uint4 (&gates)[2][4], const __nv_bfloat16* gx_step, int tile, int group) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int pix = tile * 16 + quad + 8 * half, at = min(pix, HW - 1);
      const int y = row_of(at), x = at - y * p.W;
      const __nv_bfloat16* row = gx_step + y * p.gx_sy + x * p.gx_sx + group * 32 + lane_ch;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(row + j * CH));
        gates[half][j] = pix < HW ? v : make_uint4(0, 0, 0, 0);
      }
    }
  };

  // The attention (ResidentParams::attn): T steps, h_1 .. h_{T-2} (`stored`) in the block's scratch slot.
  const int T = p.T, stored = T - 2;
  constexpr int kStored = kMaxAttentionSteps - 2;
  __nv_bfloat16* const scratch =
      p.attn == nullptr ? nullptr : p.scratch + static_cast<long long>(blockIdx.x) * max(stored, 0) * HW * CH;
  auto warp_sum = [&](float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  };

  // The cell update of a unit: gate j of channel group * 32 + lane_ch + q * 2 + e, row quad + 8 * half, is
  // acc[j * 4 + q][2 * half + e] (the recurrent convolution) + the input gate + the bias; this lane's c of those
  // channels is its own slot of the unit's cell block (read from the second step on); h goes into the map h_out.
  auto update = [&](const float (&acc)[16][4], const uint4 (&gates)[2][4], int tile, int group, bool recurrent,
                    __nv_bfloat16* h_out, const __nv_bfloat16* h_in, bool last_step) {
    uint4* c_slot = cells + ((tile * GROUPS + group) * 2) * 32 + lane;
    float bias[4][8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float4 lo = *reinterpret_cast<const float4*>(bias_s + j * CH + group * 32 + lane_ch);
      const float4 hi = *reinterpret_cast<const float4*>(bias_s + j * CH + group * 32 + lane_ch + 4);
      bias[j][0] = lo.x; bias[j][1] = lo.y; bias[j][2] = lo.z; bias[j][3] = lo.w;
      bias[j][4] = hi.x; bias[j][5] = hi.y; bias[j][6] = hi.z; bias[j][7] = hi.w;
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint4 c_old = recurrent ? c_slot[half * 32] : make_uint4(0, 0, 0, 0);
      const uint32_t* c_prev = reinterpret_cast<const uint32_t*>(&c_old);
      uint32_t c_new[4], h_new[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float2 z[4];  // gates i, g, f, o of channels lane_ch + q * 2 + {0, 1}
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 gxj = bf16x2_to_float2(reinterpret_cast<const uint32_t*>(&gates[half][j])[q]);
          z[j] = gate_pair(acc[j * 4 + q][2 * half] + gxj.x + bias[j][2 * q],
                           acc[j * 4 + q][2 * half + 1] + gxj.y + bias[j][2 * q + 1]);
        }
        const float2 si = sigmoid2(z[0]), tg = tanh2(z[1]), so = sigmoid2(z[3]);
        float2 c = make_float2(si.x * tg.x, si.y * tg.y);
        if (recurrent) {
          __half2 ch;
          memcpy(&ch, &c_prev[q], 4);
          const float2 cp = __half22float2(ch);
          const float2 sf = sigmoid2(make_float2(z[2].x + p.forget_bias, z[2].y + p.forget_bias));
          c.x = fmaf(sf.x, cp.x, c.x);
          c.y = fmaf(sf.y, cp.y, c.y);
        }
        const __half2 cs = __floats2half2_rn(c.x, c.y);
        memcpy(&c_new[q], &cs, 4);
        const float2 tc = tanh2(c);
        h_new[q] = float2_to_bf16x2(so.x * tc.x, so.y * tc.y);
      }
      c_slot[half * 32] = make_uint4(c_new[0], c_new[1], c_new[2], c_new[3]);
      const int pix = tile * 16 + quad + 8 * half, to = pix < HW ? pix : HW + 1;  // past HW: the spare row
      const int chunk = h_chunk<H_CHUNKS>(to, group * 4 + (lane & 3));
      *reinterpret_cast<uint4*>(h_out + to * CH + chunk * 8) = make_uint4(h_new[0], h_new[1], h_new[2], h_new[3]);
#if MSCRED_RESIDENT_FOLD_SCORES
      if (last_step && p.attn != nullptr) {  // warp-uniform: the shuffles below take every lane
        // This row's terms of the scores, summed over the warp into its row of warp_scores (zeroed at the step's
        // start), so that nothing stays in registers across the MMA loops (at 32 channels there is no room).
        // Pixels past HW add zeros (a select, not a product: their rows may hold anything).
        const int at = min(pix, HW - 1), c = group * 4 + (lane & 3);  // this lane's 8 channels as a row chunk
        float hl[8];
        bf16x8_to_floats(make_uint4(h_new[0], h_new[1], h_new[2], h_new[3]), hl);
        auto add_term = [&](const uint4& map_chunk, int slot) {  // <map, h_T> over the warp into row slot `slot`
          float h[8], sum = 0.f;
          bf16x8_to_floats(map_chunk, h);
#pragma unroll
          for (int e = 0; e < 8; ++e) sum = fmaf(h[e], hl[e], sum);
          sum = warp_sum(pix < HW ? sum : 0.f);
          if (lane == 0) warp_scores[warp * kMaxAttentionSteps + slot] += sum;
        };
        add_term(make_uint4(h_new[0], h_new[1], h_new[2], h_new[3]), T - 1);
        if (T > 1) add_term(*reinterpret_cast<const uint4*>(h_in + at * CH + h_chunk<H_CHUNKS>(at, c) * 8), T - 2);
#pragma unroll
        for (int t = 0; t < kStored; ++t) {
          if (t < stored) add_term(load_scratch(scratch + (static_cast<long long>(t) * HW + at) * CH + c * 8), t);
        }
      }
#endif
    }
  };

  // Each 16-byte chunk of a map (pixel, 8 channels) to global memory in channel order, by every thread.
  auto copy_map = [&](const __nv_bfloat16* from, __nv_bfloat16* to, bool scratch_map) {
    for (int i = tid; i < HW * H_CHUNKS; i += kThreads) {
      const int pix = i / H_CHUNKS, c = i % H_CHUNKS;
      const uint4 v = *reinterpret_cast<const uint4*>(from + pix * CH + h_chunk<H_CHUNKS>(pix, c) * 8);
      if (scratch_map) {
        store_scratch(to + pix * CH + c * 8, v);
      } else {
        store_global16(to + pix * CH + c * 8, v);
      }
    }
  };

  // The fused temporal attention of window b (p.attn): the scores <h_t, h_T> / T in float32 (each thread's
  // chunks, the warps' sums, then every thread adds the warps' partials from shared memory), their softmax, and the
  // weighted sum of the maps into p.attn; a second pass over the maps, as the Triton attention kernel makes (the
  // scores need all of h_T first). h_T and h_{T-1} are the block's two maps, the earlier ones (`stored`) its scratch
  // slot, written at their steps by this block and read back through L2 (ld.global.cg). The block's tensor cores
  // idle meanwhile, so the L2 loads of kBatch chunks per thread are all issued before any is used: one after the
  // other (each chunk's loads, then its arithmetic) their latencies added up to ~37 us per window at level 1
  // (results/lstm_attention/: the kernel 2.39 -> 3.40 ms, slower than the attention kernel it saved).
  auto attend = [&](long long b, const __nv_bfloat16* h_last, const __nv_bfloat16* h_prev) {
    // Chunks per thread whose loads go out together: 4 at 64 channels (8 warps, up to 255 registers), 2 at 32
    // (12 warps, 168 registers: at 4 ptxas spilled in the MMA loop).
    constexpr int kBatch = CH == 64 ? 4 : 2;
    const int n_chunks = HW * H_CHUNKS;
    // The chunks of a batch (clamped to the last: the ones past it are loaded but not used) and their loads.
    auto load_batch = [&](int i0, int (&at)[kBatch][2], uint4 (&old)[kBatch][kStored], uint4 (&prev)[kBatch],
                          uint4 (&last)[kBatch]) {
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = min(i0 + u * kThreads, n_chunks - 1), pix = i / H_CHUNKS, c = i % H_CHUNKS;
        at[u][0] = pix;
        at[u][1] = c;
        const __nv_bfloat16* from = scratch + static_cast<long long>(pix) * CH + c * 8;
#pragma unroll
        for (int t = 0; t < kStored; ++t) {
          if (t < stored) old[u][t] = load_scratch(from + static_cast<long long>(t) * HW * CH);
        }
        const int swizzled = pix * CH + h_chunk<H_CHUNKS>(pix, c) * 8;
        prev[u] = T > 1 ? *reinterpret_cast<const uint4*>(h_prev + swizzled) : make_uint4(0, 0, 0, 0);
        last[u] = *reinterpret_cast<const uint4*>(h_last + swizzled);
      }
    };
    // Every chunk of this thread, kBatch at a time: body(pixel, chunk, its scratch steps, h_{T-1}, h_T).
    auto for_each_chunk = [&](auto&& body) {
      for (int i0 = tid; i0 < n_chunks; i0 += kBatch * kThreads) {
        int at[kBatch][2];
        uint4 old[kBatch][kStored], prev[kBatch], last[kBatch];
        load_batch(i0, at, old, prev, last);
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          if (i0 + u * kThreads >= n_chunks) break;
          body(at[u][0], at[u][1], old[u], prev[u], last[u]);
        }
      }
    };
#if !MSCRED_RESIDENT_FOLD_SCORES  // else the last step's updates summed the scores' terms into warp_scores
    float score[kStored] = {}, score_prev = 0.f, score_last = 0.f;
    for_each_chunk([&](int, int, const uint4(&old)[kStored], const uint4& prev, const uint4& last) {
      float hl[8], h[8];  // a chunk's terms: <h_t, h_T> for the scratch steps, h_{T-1} and h_T itself
      bf16x8_to_floats(last, hl);
#pragma unroll
      for (int t = 0; t < kStored; ++t) {
        if (t < stored) {
          bf16x8_to_floats(old[t], h);
#pragma unroll
          for (int e = 0; e < 8; ++e) score[t] = fmaf(h[e], hl[e], score[t]);
        }
      }
      bf16x8_to_floats(prev, h);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        score_prev = fmaf(h[e], hl[e], score_prev);
        score_last = fmaf(hl[e], hl[e], score_last);
      }
    });
    // The warps' partials: slot t of a warp's row holds step t (the scratch steps, then T - 2 and T - 1).
    float* row = warp_scores + warp * kMaxAttentionSteps;
#pragma unroll
    for (int t = 0; t < kStored; ++t) {
      if (t < stored) {
        const float v = warp_sum(score[t]);
        if (lane == 0) row[t] = v;
      }
    }
    score_prev = warp_sum(score_prev);
    score_last = warp_sum(score_last);
    if (lane == 0) {
      if (T > 1) row[T - 2] = score_prev;
      row[T - 1] = score_last;
    }
#endif
    __syncthreads();
    // Each step's score, the warps' partials summed once (divided by T as the attention kernel does, not times
    // 1/T); the exponentials kept for the weights. Summed per use, as before, every thread made 3 x T x kWarps
    // dependent shared-memory loads (180 at level 1).
    float step_exp[kMaxAttentionSteps];
    float top = -INFINITY;
#pragma unroll
    for (int t = 0; t < kMaxAttentionSteps; ++t) {
      float s = 0.f;
      if (t < T) {
#pragma unroll
        for (int w = 0; w < kWarps; ++w) s += warp_scores[w * kMaxAttentionSteps + t];
        s /= static_cast<float>(T);
        top = fmaxf(top, s);
      }
      step_exp[t] = s;
    }
    float total = 0.f;
#pragma unroll
    for (int t = 0; t < kMaxAttentionSteps; ++t) {
      step_exp[t] = t < T ? expf(step_exp[t] - top) : 0.f;
      total += step_exp[t];
    }
    // The weights, picked by compile-time indices (a register array indexed by T - 1 would go to local memory).
    float weight[kStored], weight_prev = 0.f, weight_last = 0.f;
#pragma unroll
    for (int t = 0; t < kMaxAttentionSteps; ++t) {
      const float w = step_exp[t] / total;
      if (t < kStored) weight[t] = t < stored ? w : 0.f;
      if (t == T - 2) weight_prev = w;
      if (t == T - 1) weight_last = w;
    }
    __nv_bfloat16* dst = p.attn + b * p.attn_sb;
    for_each_chunk([&](int pix, int c, const uint4(&old)[kStored], const uint4& prev, const uint4& last) {
      float acc[8], h[8];
      bf16x8_to_floats(last, h);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] = weight_last * h[e];
      bf16x8_to_floats(prev, h);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] = fmaf(weight_prev, h[e], acc[e]);
#pragma unroll
      for (int t = 0; t < kStored; ++t) {
        if (t < stored) {
          bf16x8_to_floats(old[t], h);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[e] = fmaf(weight[t], h[e], acc[e]);
        }
      }
      store_global16(dst + pix * p.attn_sp + c * 8,
                     make_uint4(float2_to_bf16x2(acc[0], acc[1]), float2_to_bf16x2(acc[2], acc[3]),
                                float2_to_bf16x2(acc[4], acc[5]), float2_to_bf16x2(acc[6], acc[7])));
    });
    __syncthreads();  // the next window overwrites the maps, the scratch slot and the warps' partials
  };

  long long b = blockIdx.x;
  int step = 0;  // steps done by this block: the map written at a step is maps[step & 1]
  for (; b < p.B; b += gridDim.x) {
    for (int t = 0; t < T; ++t, ++step) {
      __nv_bfloat16* h_out = maps + (step & 1) * map_elems;
      const __nv_bfloat16* h_in = maps + ((step + 1) & 1) * map_elems;
      const __nv_bfloat16* gx_step = p.gx + b * p.gx_sb + t * p.gx_st;
#if MSCRED_RESIDENT_FOLD_SCORES
      // The last step's updates add their terms of the scores into the warp's row (the previous window's `attend`
      // read it before its closing barrier).
      if (p.attn != nullptr && t == T - 1 && lane < kMaxAttentionSteps) {
        warp_scores[warp * kMaxAttentionSteps + lane] = 0.f;
      }
      __syncwarp();
#endif
      if (t == 0) {
        // No recurrent convolution (h_{-1} = 0): the update alone, so the next unit's gates are loaded before this
        // unit's update (the accumulator's registers are free here); without it their latency was the largest
        // stall at this step (results/resident_round2/sass_32.csv.gz).
        const float zero[16][4] = {};
        uint4 next[2][4];
        if (warp < tiles) load_gates(next, gx_step, warp, 0);
        for (int tile = warp, group = 0; tile < tiles;) {
          uint4 gates[2][4];
#pragma unroll
          for (int half = 0; half < 2; ++half)
#pragma unroll
            for (int j = 0; j < 4; ++j) gates[half][j] = next[half][j];
          int next_tile = tile, next_group = group + 1;
          if (next_group == GROUPS) next_group = 0, next_tile += kWarps;
          if (next_tile < tiles) load_gates(next, gx_step, next_tile, next_group);
          update(zero, gates, tile, group, false, h_out, h_in, t == T - 1);
          tile = next_tile;
          group = next_group;
        }
      } else if constexpr (kWgmma) {
        // Units of 64 pixels (this warp's tile is the unit's quarter) and a group's 128 gate columns per warpgroup.
        constexpr int kWarpGroups = kWarps / 4;
        static_assert(kWarps % 4 == 0, "whole warpgroups");
        const int units = tiles / 4 * GROUPS;
        for (int unit = warp / 4; unit < units; unit += kWarpGroups) {
          const int tile = (unit / GROUPS) * 4 + warp % 4, group = unit % GROUPS;
          uint4 gates[2][4];
          load_gates(gates, gx_step, tile, group);  // added in the update, so their loads overlap the MMAs
          // This lane's A rows (pixel tile * 16 + r) and their four taps' source pixels, as in the loop below.
          const int r = (lane & 7) + ((lane >> 3) & 1) * 8, khalf = lane >> 4;
          const int pix = tile * 16 + r, y = row_of(pix), x = pix - y * p.W;
          uint32_t a[KSTEPS][4];
#pragma unroll
          for (int tap = 0; tap < 4; ++tap) {
            const int sy = y + (tap >> 1) - p.pad_t, sx = x + (tap & 1) - p.pad_l;
            const int src = (pix < HW && sy >= 0 && sy < p.H && sx >= 0 && sx < p.W) ? sy * p.W + sx : HW;
#pragma unroll
            for (int ts = 0; ts < TAP_STEPS; ++ts) {
              uint32_t(&frag)[4] = a[tap * TAP_STEPS + ts];
              ldmatrix_x4(smem_u32(h_in + src * CH) + h_chunk<H_CHUNKS>(src, ts * 2 + khalf) * 16, frag[0], frag[1],
                          frag[2], frag[3]);
            }
          }
          float acc[16][4];
          const unsigned b_unit = smem_u32(w_s) + group * KSTEPS * 4096;  // [k16 step] 4,096 bytes each
          wgmma_tile(acc, a, b_unit);
          update(acc, gates, tile, group, true, h_out, h_in, t == T - 1);
        }
      } else {
        // Units of kPair consecutive tiles (one, or two with MSCRED_RESIDENT_PAIR): each weight fragment then feeds
        // kPair tiles' MMAs.
        for (int first = warp * kPair; first < tiles; first += kWarps * kPair) {
#pragma unroll 1
          for (int group = 0; group < GROUPS; ++group) {
            // The first tile's input gates are added in its epilogue, so their loads overlap the MMAs.
            uint4 gates[2][4];
            load_gates(gates, gx_step, first, group);
            float acc[kPair][16][4];
#pragma unroll
            for (int u = 0; u < kPair; ++u)
#pragma unroll
              for (int nt = 0; nt < 16; ++nt) acc[u][nt][0] = acc[u][nt][1] = acc[u][nt][2] = acc[u][nt][3] = 0.f;
            // The A rows this lane addresses for ldmatrix: pixel tile * 16 + r, its four taps' source pixels
            // (HW, the zero row, outside the image or past the last pixel).
            const int r = (lane & 7) + ((lane >> 3) & 1) * 8, khalf = lane >> 4;
            int src[kPair][4];
#pragma unroll
            for (int u = 0; u < kPair; ++u) {
              const int pix = (first + u) * 16 + r;
              const int y = row_of(pix), x = pix - y * p.W;
#pragma unroll
              for (int tap = 0; tap < 4; ++tap) {
                const int sy = y + (tap >> 1) - p.pad_t, sx = x + (tap & 1) - p.pad_l;
                src[u][tap] = (pix < HW && sy >= 0 && sy < p.H && sx >= 0 && sx < p.W) ? sy * p.W + sx : HW;
              }
            }
#pragma unroll
            for (int tap = 0; tap < 4; ++tap) {
#pragma unroll
              for (int ts = 0; ts < TAP_STEPS; ++ts) {
                const int kstep = tap * TAP_STEPS + ts;
                uint32_t a[kPair][4];
#pragma unroll
                for (int u = 0; u < kPair; ++u) {
                  ldmatrix_x4(smem_u32(h_in + src[u][tap] * CH) + h_chunk<H_CHUNKS>(src[u][tap], ts * 2 + khalf) * 16,
                              a[u][0], a[u][1], a[u][2], a[u][3]);
                }
#pragma unroll
                for (int np = 0; np < 8; ++np) {
                  const int n0 = (np >> 1) * CH + group * 32 + (np & 1) * 16;  // first column of n8 tile 2np
                  uint32_t b0, b1, b2, b3;
                  ldmatrix_x4(b_lane + (kstep * G4 + n0) * 32, b0, b1, b2, b3);
#pragma unroll
                  for (int u = 0; u < kPair; ++u) {
                    mma_bf16(acc[u][2 * np], a[u], b0, b1);
                    mma_bf16(acc[u][2 * np + 1], a[u], b2, b3);
                  }
                }
              }
            }
            update(acc[0], gates, first, group, true, h_out, h_in, t == T - 1);
            if (kPair == 2 && first + 1 < tiles) {
              load_gates(gates, gx_step, first + 1, group);
              update(acc[kPair - 1], gates, first + 1, group, true, h_out, h_in, t == T - 1);
            }
          }
        }
      }
      __syncthreads();  // h_t complete: the next step reads it, and it is copied out now
      if (p.attn == nullptr) {
        copy_map(h_out, p.out + b * p.out_sb + static_cast<long long>(t) * p.out_st, false);
      } else if (t < T - 2) {  // h_{T-1} and h_T stay in the maps for the attention
        copy_map(h_out, scratch + static_cast<long long>(t) * HW * CH, true);
      } else if (t == T - 1) {
        attend(b, h_out, h_in);
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
  cudaError_t err = allow_shared_memory<window_lstm_resident<CH>>(smem);
  if (err != cudaSuccess) return err;
  const int grid = grid_of(p.B, sms);
  kernel<<<grid, warps_of<CH>() * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

size_t shared_bytes(int ch, int hw) {
  const size_t tiles = tiles_of(hw);
  return sizeof(__nv_bfloat16) * (16 * ch * ch + 2 * (hw + 2) * ch) + sizeof(float) * 4 * ch +
         sizeof(__half2) * tiles * (ch / 32) * 8 * 32 + sizeof(float) * kMaxWarps * kMaxAttentionSteps;
}

const char* mma_kind() { return kTileRound == 64 ? "wgmma" : "mma.sync"; }  // 64-pixel units with wgmma only

cudaError_t window_lstm_resident_forward(const ResidentParams& p, int ch, int sms, cudaStream_t stream) {
  if (p.B <= 0 || p.T <= 0) return cudaSuccess;
  if (p.attn != nullptr && p.T > kMaxAttentionSteps) return cudaErrorInvalidValue;
  if (ch == 32 && p.H * p.W <= kMaxPixels32) return launch<32>(p, sms, stream);
  if (ch == 64 && p.H * p.W <= kMaxPixels64) return launch<64>(p, sms, stream);
  return cudaErrorInvalidValue;
}

}  // namespace mscred_resident
