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
template <int WGS, int BN, int STAGES>
struct WgmmaPatchTile {
  static constexpr int THREADS = 128 * WGS, IMGS = 4 * WGS, P = 16, HW = 64, CK = 8;
  static constexpr int BM = BN;                                // output channels per block (patch_takes' name)
  static constexpr int B_BYTES = BN * 128;                     // weights: BN rows of 32 floats, 128B-swizzled
  static constexpr int X_BYTES = IMGS * CK * HW * 4;           // input: IMGS x CK dense channel planes
  static constexpr int STAGE_BYTES = B_BYTES + X_BYTES;        // a multiple of 1024: every stage's atoms aligned
  static constexpr size_t SMEM_BYTES = (size_t)STAGES * STAGE_BYTES + 1024;  // + room to align the base to 1024
  static_assert(STAGE_BYTES % 1024 == 0, "swizzle atoms 1024-byte aligned in every stage");
};

template <int WGS, int BN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__(128 * WGS, MIN_BLOCKS)
    conv_patch_wgmma(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                     float* __restrict__ y, ConvShape s, bool apply_selu) {
  using T = WgmmaPatchTile<WGS, BN, STAGES>;
  constexpr int TH = T::THREADS, IMGS = T::IMGS, CK = T::CK, HW = T::HW, P = T::P;
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

  // A fragment offsets in the stage's planes (words): pixel g (and g + 8: +32 words), tap t of channel 2 kb (+1).
  const int g = lane / 4, t = lane % 4;
  const int a_off = warp * CK * HW + (2 * (g / 4) + t / 2) * 8 + 2 * (g % 4) + t % 2;

  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  cp_async_k_loop<STAGES, true>(ksteps, load_stage, [&](int slot) {
    const uint8_t* stage = smem + slot * T::STAGE_BYTES;
    const uint32_t* xs = reinterpret_cast<const uint32_t*>(stage + T::B_BYTES) + a_off;
    uint32_t a[CK / 2][4];
#pragma unroll
    for (int kb = 0; kb < CK / 2; ++kb) {
      a[kb][0] = to_tf32(__uint_as_float(xs[2 * kb * HW]));
      a[kb][1] = to_tf32(__uint_as_float(xs[2 * kb * HW + 32]));
      a[kb][2] = to_tf32(__uint_as_float(xs[(2 * kb + 1) * HW]));
      a[kb][3] = to_tf32(__uint_as_float(xs[(2 * kb + 1) * HW + 32]));
    }
    const uint64_t desc = wgmma_desc_sw128(stage);
    wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < CK / 2; ++kb) wgmma_tf32_rs<BN>(acc, a[kb], desc + 2 * kb);  // +32 bytes per k8-block
    wgmma_commit();
    wgmma_wait<0>();  // this K-step's slot is free once every warpgroup passes the next barrier
  });

  // Epilogue: acc[4j + v] is pixel g + 8 (v / 2) of channel o0 + 8j + 2t + v % 2, image n0 + warp.
  const int n = n0 + warp;
  if (n >= N) return;
  float* yn = y + (int64_t)n * O * P;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int o = o0 + 8 * j + 2 * t + h;
      if (o >= O) continue;
      const float bv = bias != nullptr ? __ldg(bias + o) : 0.f;
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        float z = acc[4 * j + 2 * v + h] + bv;
        if (apply_selu) z = selu_fast(z);
        yn[o * P + g + 8 * v] = z;
      }
    }
}

template <int WGS, int BN, int STAGES, int MIN_BLOCKS>
struct WgmmaPatchLaunch {
  using T = WgmmaPatchTile<WGS, BN, STAGES>;
  static constexpr auto kernel = conv_patch_wgmma<WGS, BN, STAGES, MIN_BLOCKS>;
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
