// conv_patch_wgmma: conv4's 2 x 2 patch implicit GEMM on Hopper's warpgroup MMA (wgmma), a candidate measured in
// the standalone harness beside the product's conv_patch (patch.cuh). Needs sm_90a (nvcc -arch=sm_90a).
//
// Why: conv_patch is mma.sync at ~100 TFLOP/s on conv4 (0.0272 ms at batch 640); its probes say the MMAs alone take
// 0.021 ms and the copies alone 0.020 (results/conv4_probes/). wgmma is the H200's full-rate TF32 path (one
// m64n256k8 per 128 tensor-core cycles, ~4x fewer issue slots than 128 mma.sync of the same work) and reads one
// operand straight from shared memory, so the MMA side can shrink well below the copies.
//
// The roles are swapped against conv_patch: M = output pixels, N = output channels, so that
//   * B (N x K, K-major, read by the tensor core from shared memory) is the weight matrix as it is: row o holds
//     W[o][k0 .. k0+31] for the K-step's 8 channels (32 floats = one 128-byte row), copied by 16-byte cp.async into
//     the 128-byte swizzle (chunk c of row r at chunk c ^ (r % 8), 8-row atoms 1024 bytes apart: SBO = 1024);
//     wgmma's TF32 needs K-major B, which the pixels' im2col rows (two taps per input row) could not give;
//   * A (M x K) comes from registers, loaded per thread from whole channel planes (the input copied as it is, as
//     in conv_patch) with W's natural k order: slot s of k8-block kb is tap s % 4 of channel 2 kb + s / 4, so a
//     thread's a0..a3 (rows g, g+8 at slots t, t+4) are tap t of channels 2kb, 2kb+1 at pixels g and g+8, four
//     4-byte loads (lanes g: offsets {0,2,4,6,16,18,20,22}, t: {0,1,8,9}: 32 banks, conflict-free). A is rounded
//     to TF32 (cvt.rn); B, read by the tensor core, is truncated to TF32 by it (no instruction of ours sees it).
// Each warp of a warpgroup is one image (16 pixels: its 16 M rows), a warpgroup 4 images, a block WGS warpgroups x
// BN output channels (wgmma N = BN, BN / 2 accumulators per thread). K-steps of 8 channels through a STAGES-deep
// cp.async ring (cp_async_k_loop); each K-step's 4 wgmmas are committed as one group and waited for before the
// next K-step's barrier, so the ring slot a barrier frees is never still being read by the tensor core.
// Epilogue straight from the accumulators: thread (g, t) holds pixels g, g+8 of channels 8j+2t, 8j+2t+1; a warp's
// 4-byte store covers 4 channels x 8 consecutive pixels, 32-byte sectors written whole.
#pragma once

#include <cuda.h>          // CUtensorMap (types only: the encoder comes through the runtime)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <type_traits>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "patch_wgmma.cuh needs sm_90a (wgmma): build the harness with -arch=sm_90a"
#endif

namespace mscred_im2col {
namespace {

// Shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle: start address, leading byte offset
// (unused for swizzled K-major layouts: 1), stride byte offset 1024 (8 rows of 128 bytes), layout type 1 = 128B.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void* smem_ptr) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// d[0..BN/2) += A (4 registers, TF32) x B (descriptor), m64 n BN k8, f32 accumulators.
template <int BN>
__device__ __forceinline__ void wgmma_tf32_rs(float* d, const uint32_t (&a)[4], uint64_t desc);

#define MSCRED_WGMMA_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), \
                           "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

template <>
__device__ __forceinline__ void wgmma_tf32_rs<128>(float* d, const uint32_t (&a)[4], uint64_t desc) {
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
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1u));  // scale-d = 1: D += A B
}

template <>
__device__ __forceinline__ void wgmma_tf32_rs<256>(float* d, const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
      "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
      "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
      "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
      "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, "
      "{%128,%129,%130,%131}, %132, p, 1, 1;\n}\n"
      : MSCRED_WGMMA_D8(0), MSCRED_WGMMA_D8(8), MSCRED_WGMMA_D8(16), MSCRED_WGMMA_D8(24), MSCRED_WGMMA_D8(32),
        MSCRED_WGMMA_D8(40), MSCRED_WGMMA_D8(48), MSCRED_WGMMA_D8(56), MSCRED_WGMMA_D8(64), MSCRED_WGMMA_D8(72),
        MSCRED_WGMMA_D8(80), MSCRED_WGMMA_D8(88), MSCRED_WGMMA_D8(96), MSCRED_WGMMA_D8(104), MSCRED_WGMMA_D8(112),
        MSCRED_WGMMA_D8(120)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1u));  // scale-d = 1: D += A B
}
#undef MSCRED_WGMMA_D8

// Tile of conv_patch_wgmma for 4 x 4 outputs of 8 x 8 inputs.
// PRODUCERS: warps that only copy (conv_patch_wgmma_ws), beside the WGS warpgroups.
template <int WGS, int BN, int STAGES, int PRODUCERS = 0>
struct WgmmaPatchTile {
  static constexpr int CONSUMERS = 128 * WGS, THREADS = CONSUMERS + 32 * PRODUCERS;
  static constexpr int IMGS = 4 * WGS, P = 16, HW = 64, CK = 8;
  static constexpr int BM = BN;                                // output channels per block (patch_takes' name)
  static constexpr int B_BYTES = BN * 128;                     // weights: BN rows of 32 floats, 128B-swizzled
  static constexpr int X_BYTES = IMGS * CK * HW * 4;           // input: IMGS x CK dense channel planes
  static constexpr int STAGE_BYTES = B_BYTES + X_BYTES;        // a multiple of 1024: every stage's atoms aligned
  static constexpr size_t SMEM_BYTES = (size_t)STAGES * STAGE_BYTES + 1024;  // + room to align the base to 1024
  static_assert(STAGE_BYTES % 1024 == 0, "swizzle atoms 1024-byte aligned in every stage");
};

// Byte offset of 16-byte chunk c of weight row `row` in a stage (the 128-byte swizzle), row's 8-row atom excluded.
__device__ __forceinline__ uint32_t row_swizzle(int row, int c) { return (row % 8) * 128 + ((c ^ (row % 8)) << 4); }

// A fragment offset of this thread in a stage's planes (words): image `warp`, pixel g (g + 8: +32 words), tap t.
template <typename T>
__device__ __forceinline__ int wgmma_patch_a_off(int warp, int lane) {
  const int g = lane / 4, t = lane % 4;
  return warp * T::CK * T::HW + (2 * (g / 4) + t / 2) * 8 + 2 * (g % 4) + t % 2;
}

// One K-step of a warpgroup on a landed stage: A from the planes (channels 2 kb, 2 kb + 1 of k8-block kb, rounded to
// TF32), B by descriptor (+32 bytes per k8-block inside the swizzled rows); the 4 wgmmas committed as one group.
template <typename T, int NACC>
__device__ __forceinline__ void wgmma_patch_step(float (&acc)[NACC], const uint8_t* stage, int a_off) {
  constexpr int CK = T::CK, HW = T::HW;
  // ld.shared by address: the stage pointer went through integer arithmetic (the 1024-byte alignment), after which
  // the compiler emitted generic loads for it
  const unsigned xs = smem_addr(stage + T::B_BYTES) + 4 * a_off;
  uint32_t a[CK / 2][4];
#pragma unroll
  for (int kb = 0; kb < CK / 2; ++kb) {
    a[kb][0] = to_tf32(__uint_as_float(lds_u32(xs + 4 * (2 * kb * HW))));
    a[kb][1] = to_tf32(__uint_as_float(lds_u32(xs + 4 * (2 * kb * HW + 32))));
    a[kb][2] = to_tf32(__uint_as_float(lds_u32(xs + 4 * ((2 * kb + 1) * HW))));
    a[kb][3] = to_tf32(__uint_as_float(lds_u32(xs + 4 * ((2 * kb + 1) * HW + 32))));
  }
  const uint64_t desc = wgmma_desc_sw128(stage);
  wgmma_fence();
#pragma unroll
  for (int kb = 0; kb < CK / 2; ++kb) wgmma_tf32_rs<2 * NACC>(acc, a[kb], desc + 2 * kb);
  wgmma_commit();
}

// The block's BN biases (zero past O, or without bias) into shared memory, by the first `threads` threads; the
// caller's next barrier publishes them.
template <int BN>
__device__ __forceinline__ void wgmma_stage_bias(float* bias_s, const float* __restrict__ bias, int o0, int O, int tid,
                                                 int threads) {
  for (int i = tid; i < BN; i += threads) bias_s[i] = bias != nullptr && o0 + i < O ? __ldg(bias + o0 + i) : 0.f;
}

// Epilogue from the accumulators: acc[4j + v] is pixel g + 8 (v / 2) of channel o0 + 8j + 2t + v % 2, image n;
// biases from shared memory (the per-value __ldg of a first version waited on L2 once per channel pair: 35% of the
// stall samples at batch 640). A tile past O checks each channel; a full one (every tile at conv4) does not.
template <int NACC>
__device__ __forceinline__ void wgmma_patch_epilogue(const float (&acc)[NACC], float* __restrict__ y,
                                                     const float* bias_s, int O, int o0, int n, int lane,
                                                     bool apply_selu) {
  constexpr int P = 16, BN = 2 * NACC;
  const int g = lane / 4, t = lane % 4;
  float* yn = y + ((int64_t)n * O + o0) * P + g;
  auto store = [&](auto full) {
#pragma unroll
    for (int j = 0; j < NACC / 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int o = 8 * j + 2 * t + h;
        if (!decltype(full)::value && o0 + o >= O) continue;
        const float bv = bias_s[o];
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          float z = acc[4 * j + 2 * v + h] + bv;
          if (apply_selu) z = selu_fast(z);
          yn[o * P + 8 * v] = z;
        }
      }
  };
  if (o0 + BN <= O)
    store(std::true_type{});
  else
    store(std::false_type{});
}

template <int WGS, int BN, int STAGES, int MIN_BLOCKS, bool FENCE = true>
__global__ void __launch_bounds__(128 * WGS, MIN_BLOCKS)
    conv_patch_wgmma(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                     float* __restrict__ y, ConvShape s, bool apply_selu) {
  using T = WgmmaPatchTile<WGS, BN, STAGES>;
  constexpr int TH = T::THREADS, IMGS = T::IMGS, CK = T::CK, HW = T::HW;
  constexpr int A_CHUNKS = BN * 8;                 // 16-byte weight chunks per K-step: BN rows x 8
  constexpr int X_CHUNKS = IMGS * CK * HW / 4;     // 16-byte input chunks per K-step
  static_assert(A_CHUNKS % TH == 0 && X_CHUNKS % TH == 0, "copies spread evenly over the threads");
  constexpr int A_PER = A_CHUNKS / TH, X_PER = X_CHUNKS / TH;

  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));

  const int C = s.C, K = 4 * C, O = s.O, N = s.N, ksteps = C / CK;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;  // warp = image of the block (0 .. IMGS-1)
  const int o0 = blockIdx.y * BN, n0 = blockIdx.x * IMGS;

  // Copies, set up once (offsets at K-step 0; they advance by 32 weights and CK planes per K-step).
  int a_src[A_PER], a_dst[A_PER], x_src[X_PER];
  uint32_t ok_bits = 0;
#pragma unroll
  for (int r = 0; r < A_PER; ++r) {
    const int e = tid + TH * r, row = e / 8, c = e % 8;
    a_src[r] = (o0 + row) * K + 4 * c;
    a_dst[r] = row * 128 + ((c ^ (row % 8)) << 4);
    if (o0 + row < O) ok_bits |= 1u << r;
  }
#pragma unroll
  for (int r = 0; r < X_PER; ++r) {
    const int e = tid + TH * r, plane = e / (HW / 4), q = e % (HW / 4), img = plane / CK, c = plane % CK;
    x_src[r] = ((n0 + img) * C + c) * HW + 4 * q;
    if (n0 + img < N) ok_bits |= 1u << (A_PER + r);
  }
  auto load_stage = [&](int ks, int slot) {
    uint8_t* stage = smem + slot * T::STAGE_BYTES;
    const int k0 = ks * 4 * CK, x0 = ks * CK * HW;
#pragma unroll
    for (int r = 0; r < A_PER; ++r) {
      const bool ok = (ok_bits >> r) & 1u;
      cp_async16(reinterpret_cast<uint32_t*>(stage + a_dst[r]), w + (ok ? a_src[r] + k0 : 0), ok);
    }
    uint32_t* xs = reinterpret_cast<uint32_t*>(stage + T::B_BYTES);
#pragma unroll
    for (int r = 0; r < X_PER; ++r) {
      const bool ok = (ok_bits >> (A_PER + r)) & 1u;
      cp_async16(xs + 4 * (tid + TH * r), x + (ok ? x_src[r] + x0 : 0), ok);
    }
  };

  const int a_off = wgmma_patch_a_off<T>(warp, lane);
  __shared__ float bias_s[BN];
  wgmma_stage_bias<BN>(bias_s, bias, o0, O, tid, TH);  // published by the K loop's barriers (ksteps >= 1)

  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  cp_async_k_loop<STAGES, FENCE>(ksteps, load_stage, [&](int slot) {
    wgmma_patch_step<T>(acc, smem + slot * T::STAGE_BYTES, a_off);
    wgmma_wait<0>();  // this K-step's slot is free once every warpgroup passes the next barrier
  });

  if (n0 + warp < N) wgmma_patch_epilogue(acc, y, bias_s, O, o0, n0 + warp, lane, apply_selu);
}

// ---------------------------------------------------------------------------------------------------------------
// The same with the copies in producer warps of their own (warp specialization). Measured: conv_patch_wgmma's
// K-steps took ~1.1 us each whatever its ring depth (batch 1: 0.0178 ms with 2 K-steps in flight, 0.0175 with 3,
// 0.0223 with 1), as if each waited for the copies of every stage in flight, the prefetches included: our reading
// is that a warpgroup's wgmma waits for its own threads' outstanding shared-memory writes, cp.async among them.
// Here the warpgroups issue no copies. PRODUCERS warps copy K-step ks into ring slot ks % STAGES once the consumers
// have released it (EMPTY: CONSUMERS arrivals), each producer lane arriving on FULL when its copies have landed
// (cp.async.mbarrier.arrive.noinc: 32 PRODUCERS arrivals); a consumer waits on FULL, fences the async proxy (the
// copies were generic-proxy writes), runs the K-step, waits for its wgmmas and releases the slot.
template <int WGS, int BN, int STAGES, int MIN_BLOCKS, int PRODUCERS>
__global__ void __launch_bounds__(128 * WGS + 32 * PRODUCERS, MIN_BLOCKS)
    conv_patch_wgmma_ws(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                        float* __restrict__ y, ConvShape s, bool apply_selu) {
  using T = WgmmaPatchTile<WGS, BN, STAGES, PRODUCERS>;
  constexpr int IMGS = T::IMGS, CK = T::CK, HW = T::HW, PT = 32 * PRODUCERS;
  constexpr int A_CHUNKS = BN * 8, X_CHUNKS = IMGS * CK * HW / 4;
  static_assert(A_CHUNKS % PT == 0 && X_CHUNKS % PT == 0 && (PT == 32 || PT == 64 || PT == 128) &&
                    CK % (PT / 16) == 0,
                "copies spread evenly over the producers");

  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  __shared__ uint64_t full_bar[STAGES], empty_bar[STAGES];

  const int C = s.C, K = 4 * C, O = s.O, N = s.N, ksteps = C / CK;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int o0 = blockIdx.y * BN, n0 = blockIdx.x * IMGS;
  __shared__ float bias_s[BN];
  wgmma_stage_bias<BN>(bias_s, bias, o0, O, tid, T::THREADS);
  if (tid < STAGES) {
    mbar_init(&full_bar[tid], PT);
    mbar_init(&empty_bar[tid], T::CONSUMERS);
  }
  __syncthreads();

  if (tid >= T::CONSUMERS) {
    // ---- producers: thread p copies weight chunks p + PT r (row p / 8 + r PT / 8, chunk p % 8) and input chunks
    // p + PT r (plane p / 16 + r PT / 16 of the tile: image, channel; chunk p % 16).
    const int p = tid - T::CONSUMERS, c8 = p % 8;
    // Sources advance by a pointer step per chunk (not offsets computed per chunk, which ptxas hoists out of the
    // K loop into registers: up to 96 64-bit addresses, spilled).
    const int64_t w_step = (int64_t)(PT / 8) * K, x_img_step = (int64_t)C * HW;
    // Rows p / 8 + r PT / 8: with PT / 8 a multiple of 8 each keeps row p / 8's swizzle, PT / 8 * 128 bytes on;
    // with PT / 8 = 4 (one producer warp) rows alternate between two swizzles, 1024 bytes on every second row.
    const uint32_t sw0 = ((p / 8) & ~7) * 128 + row_swizzle(p / 8, c8), sw1 = row_swizzle(p / 8 + 4, c8);
    for (int ks = 0; ks < ksteps; ++ks) {
      const int slot = ks % STAGES;
      if (ks >= STAGES) mbar_wait(&empty_bar[slot], (ks / STAGES - 1) & 1);  // K-step ks - STAGES consumed
      uint8_t* stage = smem + slot * T::STAGE_BYTES;
      const float* src = w + (int64_t)(o0 + p / 8) * K + 4 * c8 + ks * 4 * CK;
#pragma unroll
      for (int r = 0; r < A_CHUNKS / PT; ++r) {
        const int row = p / 8 + r * (PT / 8);
        const bool ok = o0 + row < O;
        const uint32_t dst = PT / 8 == 4 ? (r / 2) * 1024 + ((r & 1) ? sw1 : sw0) : r * (PT / 8) * 128 + sw0;
        cp_async16(reinterpret_cast<uint32_t*>(stage + dst), ok ? src : w, ok);
        src += w_step;
      }
      uint32_t* xs = reinterpret_cast<uint32_t*>(stage + T::B_BYTES);
      // plane p / 16 + r PT / 16 of the tile = image r PT / 16 / CK, channel (p / 16 + r PT / 16) % CK (PT / 16
      // divides CK: a chunk row never straddles two images)
      const float* xsrc = x + ((int64_t)n0 * C + ks * CK + p / 16) * HW + 4 * (p % 16);
#pragma unroll
      for (int r = 0; r < X_CHUNKS / PT; ++r) {
        const int plane = r * (PT / 16), img = plane / CK, c = plane % CK;
        const bool ok = n0 + img < N;
        cp_async16(xs + 4 * (p + PT * r), ok ? xsrc + img * x_img_step + c * HW : x, ok);
      }
      asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(smem_addr(&full_bar[slot])) : "memory");
    }
    cp_async_wait<0>();
    return;
  }

  // ---- consumers
  const int a_off = wgmma_patch_a_off<T>(warp, lane);
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  for (int ks = 0; ks < ksteps; ++ks) {
    const int slot = ks % STAGES;
    mbar_wait(&full_bar[slot], (ks / STAGES) & 1);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    wgmma_patch_step<T>(acc, smem + slot * T::STAGE_BYTES, a_off);
    wgmma_wait<0>();
    mbar_arrive(&empty_bar[slot]);
  }
  if (n0 + warp < N) wgmma_patch_epilogue(acc, y, bias_s, O, o0, n0 + warp, lane, apply_selu);
}

template <int WGS, int BN, int STAGES, int MIN_BLOCKS, int PRODUCERS>
struct WgmmaWsLaunch {
  using T = WgmmaPatchTile<WGS, BN, STAGES, PRODUCERS>;
  static constexpr auto kernel = conv_patch_wgmma_ws<WGS, BN, STAGES, MIN_BLOCKS, PRODUCERS>;
  static bool takes(const float* x, const float* w, const float* y, const ConvShape& s) {
    return patch_takes<T>(kernel, x, w, y, s, 4, 4, 8, 8, T::IMGS);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    return patch_launch<T>(kernel, T::IMGS, x, w, bias, y, s, selu_, stream);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The same with the copies as two tensor-map bulk copies (TMA) per K-step, issued by one thread of a producer warp.
// Measured: both kernels above move ~20-40 GB/s per SM (batch 1, one block per SM: 24 GB/s; 16-byte cp.async from
// many threads), whatever their ring depth, so per-SM copy throughput, not the MMAs, bounds them. The TMA engine
// takes a whole box per request: the K-step's weights (a {32, BN} box of W seen as [O][K], landing in the 128-byte
// swizzle wgmma reads) and its input planes (a {64, CK, IMGS} box of x seen as [N][C][HW], landing as dense planes;
// images past N and rows past O are zero-filled by the copy). FULL: one arrival (the producer's expect_tx) plus the
// copies' bytes; EMPTY: CONSUMERS arrivals, each after a fence (the consumers' plane reads are generic-proxy reads
// of memory the next copy writes through the async proxy).
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2),
      "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// PIPE: a K-step's wgmmas still run while the next K-step's fragments load and its wgmmas issue (wait_group 1; the
// slot of K-step ks - 1 is released after K-step ks's issue).
template <int WGS, int BN, int STAGES, int MIN_BLOCKS, bool PIPE = false>
__global__ void __launch_bounds__(128 * WGS + 32, MIN_BLOCKS)
    conv_patch_wgmma_tma(const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_x,
                         const float* __restrict__ bias, float* __restrict__ y, ConvShape s, bool apply_selu) {
  using T = WgmmaPatchTile<WGS, BN, STAGES, 1>;
  constexpr int IMGS = T::IMGS, CK = T::CK;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  __shared__ uint64_t full_bar[STAGES], empty_bar[STAGES];

  const int O = s.O, N = s.N, ksteps = s.C / CK;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int o0 = blockIdx.y * BN, n0 = blockIdx.x * IMGS;
  __shared__ float bias_s[BN];
  wgmma_stage_bias<BN>(bias_s, bias, o0, O, tid, T::THREADS);
  if (tid < STAGES) {
    mbar_init(&full_bar[tid], 1);
    mbar_init(&empty_bar[tid], T::CONSUMERS);
  }
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // the copies' completions see the init
  __syncthreads();

  if (tid >= T::CONSUMERS) {
    if (tid != T::CONSUMERS) return;
    for (int ks = 0; ks < ksteps; ++ks) {
      const int slot = ks % STAGES;
      if (ks >= STAGES) mbar_wait(&empty_bar[slot], (ks / STAGES - 1) & 1);  // K-step ks - STAGES consumed
      uint8_t* stage = smem + slot * T::STAGE_BYTES;
      mbar_arrive_expect_tx(&full_bar[slot], T::STAGE_BYTES);
      tma_load_2d(stage, &map_w, ks * 4 * CK, o0, &full_bar[slot]);
      tma_load_3d(stage + T::B_BYTES, &map_x, 0, ks * CK, n0, &full_bar[slot]);
    }
    return;
  }

  const int a_off = wgmma_patch_a_off<T>(warp, lane);
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  for (int ks = 0; ks < ksteps; ++ks) {
    const int slot = ks % STAGES;
    mbar_wait(&full_bar[slot], (ks / STAGES) & 1);
    wgmma_patch_step<T>(acc, smem + slot * T::STAGE_BYTES, a_off);
    if constexpr (PIPE) {
      wgmma_wait<1>();  // K-step ks - 1's wgmmas are done
      if (ks > 0) {
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        mbar_arrive(&empty_bar[(ks - 1) % STAGES]);
      }
    } else {
      wgmma_wait<0>();
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      mbar_arrive(&empty_bar[slot]);
    }
  }
  if constexpr (PIPE) wgmma_wait<0>();  // (the last slot is never refilled)
  if (n0 + warp < N) wgmma_patch_epilogue(acc, y, bias_s, O, o0, n0 + warp, lane, apply_selu);
}

// cuTensorMapEncodeTiled from the driver, found once through the runtime (no -lcuda).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

template <int WGS, int BN, int STAGES, int MIN_BLOCKS, bool PIPE = false>
struct WgmmaTmaLaunch {
  using T = WgmmaPatchTile<WGS, BN, STAGES, 1>;
  static constexpr auto kernel = conv_patch_wgmma_tma<WGS, BN, STAGES, MIN_BLOCKS, PIPE>;
  static bool takes(const float* x, const float* w, const float* y, const ConvShape& s) {
    return tensor_map_encoder() != nullptr && patch_takes<T>(kernel, x, w, y, s, 4, 4, 8, 8, T::IMGS);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    CUtensorMap map_w{}, map_x{};
    const cuuint64_t w_dims[2] = {(cuuint64_t)s.K(), (cuuint64_t)s.O}, w_strides[1] = {(cuuint64_t)s.K() * 4};
    const cuuint32_t w_box[2] = {32, BN}, ones[3] = {1, 1, 1};
    const cuuint64_t x_dims[3] = {64, (cuuint64_t)s.C, (cuuint64_t)s.N};
    const cuuint64_t x_strides[2] = {64 * 4, (cuuint64_t)s.C * 64 * 4};
    const cuuint32_t x_box[3] = {64, T::CK, T::IMGS};
    auto encode = tensor_map_encoder();
    if (encode(&map_w, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(w), w_dims, w_strides, w_box, ones,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS ||
        encode(&map_x, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(x), x_dims, x_strides, x_box, ones,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      return cudaErrorInvalidValue;
    const dim3 grid((s.N + T::IMGS - 1) / T::IMGS, (s.O + BN - 1) / BN);
    kernel<<<grid, T::THREADS, T::SMEM_BYTES, stream>>>(map_w, map_x, bias, y, s, selu_);
    return cudaGetLastError();
  }
};

// FENCE = false (a probe: the async-proxy fence left out, which the PTX memory model requires) measures the fence.
template <int WGS, int BN, int STAGES, int MIN_BLOCKS, bool FENCE = true>
struct WgmmaPatchLaunch {
  using T = WgmmaPatchTile<WGS, BN, STAGES>;
  static constexpr auto kernel = conv_patch_wgmma<WGS, BN, STAGES, MIN_BLOCKS, FENCE>;
  static bool takes(const float* x, const float* w, const float* y, const ConvShape& s) {
    return patch_takes<T>(kernel, x, w, y, s, 4, 4, 8, 8, T::IMGS);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    return patch_launch<T>(kernel, T::IMGS, x, w, bias, y, s, selu_, stream);
  }
};

}  // namespace
}  // namespace mscred_im2col
