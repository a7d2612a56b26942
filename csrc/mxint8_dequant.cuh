// MXINT8 -> bf16 dequantization with CuTe: the decode, two kernels and their launcher.
//
// Pure CUDA + CuTe (no PyTorch): the torch binding is csrc/mxint8_torch.cpp, and
// csrc/mxint8_kernels.cu instantiates this file alone so that it can be compile-checked without torch.
//
// Format: groups of `group_size` int8 mantissas m share one uint8 exponent E (bias 127);
// value = m * 2^(E-127) / 64. Decoded exactly to bf16 for every byte pair (see decode_bits).
//
// Kernels
//   dequant_vec_kernel   fast path: 8 elements a thread-vector (one 8-byte load, one 16-byte store, both
//                        coalesced across the warp), 8 such loads in flight per thread, one CTA per tile
//                        (the loop strides when launched with fewer). Needs an 8-byte aligned input and a
//                        16-byte aligned output.
//   dequant_tile_kernel  the lab's structure kept readable: the tensor viewed as (group_size, num_groups),
//                        a (BLK_M, BLK_K) CTA tiler, a column-major thread layout, predicated ragged tiles,
//                        1-D grid-stride (so no 65535 grid-y limit). Any alignment; the fallback.
// Both read every input byte once and write every output element once: 1 + 1/group_size bytes in and
// 2 bytes out per element.
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_runtime.h>
#include <cute/tensor.hpp>

namespace labkit_mxint8 {

// Launch constants; labkit/kernels/tiling.py mirrors them for the notebook's drawing (a test compares).
constexpr int kVecElems = 8;      // elements per thread-vector: 8 B of mantissas in, 16 B of bf16 out
constexpr int kVecThreads = 256;  // threads per CTA, fast path
#ifdef LABKIT_MXINT8_VEC_UNROLL_OVERRIDE  // python -m labkit.kernels.variants builds other unrolls to compare
constexpr int kVecUnroll = LABKIT_MXINT8_VEC_UNROLL_OVERRIDE;
#else
constexpr int kVecUnroll = 8;     // vectors per thread per CTA tile (8 x 8 B loads in flight)
#endif
constexpr int kTileElems = 1024;  // elements per CTA tile, lab-structure kernel (BLK_M * BLK_K)
constexpr int kTileThreads = 256; // threads per CTA, lab-structure kernel (4 elements each)

__host__ __device__ __forceinline__ float bf16_bits_to_float(uint32_t bits) {
  uint32_t word = bits << 16;
  float f;
  memcpy(&f, &word, sizeof f);
  return f;
}

__host__ __device__ __forceinline__ uint32_t float_to_bf16_bits_exact(float f) {
  // Only used on values that bf16 represents exactly (<= 7 significant bits), so truncation is exact.
  uint32_t word;
  memcpy(&word, &f, sizeof word);
  return word >> 16;
}

// bf16 bits of m * 2^(E-127) / 64, exact (E = 255 -> NaN, as OCP MX reserves that scale).
// The sheet's bit assembly, with the cases where it is not exact patched (E = 0, E = 255, m = -128) and
// subnormal results written directly.
__host__ __device__ __forceinline__ uint16_t decode_bits(uint8_t x, uint8_t e) {
  const uint32_t sign = (uint32_t(x) & 0x80u) << 8;
  const int32_t m = int32_t(int8_t(x));
  const uint32_t a = uint32_t(m < 0 ? -m : m);  // |m| in 0..128
  const uint32_t exp = uint32_t(e) << 7;
  const uint32_t frac = (a & 0x3Fu) << 1;        // the low 6 bits of |m| fill bf16's 7-bit fraction
  const uint32_t out = sign | exp | frac;        // +-2^(E-127) * (1 + frac6/64): bf16 adds a leading 1
  const uint32_t bias = sign | exp;              // +-2^(E-127): that implicit leading 1 alone
  // |m| >= 64: bit 6 of |m| *is* the leading 1, so `out` is already right. |m| < 64: remove it.
  const bool dont_need_abs = (a & 0x40u) != 0;
  uint32_t y = dont_need_abs ? out
                             : float_to_bf16_bits_exact(bf16_bits_to_float(out) - bf16_bits_to_float(bias));
  // Results below 2^-126 (E < 7, |m| < 2^(7-E)) are bf16 subnormals whose 7-bit fraction is |m| << E: written
  // directly, so no float subnormal is ever produced and the decode stays exact under flush-to-zero.
  if (!dont_need_abs && e < 7 && (a << e) < 128u) y = sign | (a << e);
  // E = 0: bf16's zero exponent field has no implicit 1 either, and |m| * 2^-133 is exactly the
  // subnormal whose 7-bit fraction is |m| (|m| = 128 carries into exponent field 1: 2^-126).
  if (e == 0) y = sign | a;
  // m = -128 (outside the quantizer's [-127, 127], but a valid byte): -2 * 2^(E-127); E = 254 -> -inf.
  else if (a == 128) y = sign | ((uint32_t(e) + 1) << 7);
  if (e == 255) y = 0x7FC0u;  // the exponent field of inf/NaN: decoded as NaN
  return uint16_t(y);
}

// The fast path's decode for a group whose exponent is "ordinary" (7 <= E <= 254): m * 2^(E-133) is a
// normal float (|m| >= 1) or zero, the product is exact (m has at most 8 significant bits) and so is its
// conversion to bf16 (at most 7; -128 * 2^121 overflows to -inf, as decode_bits says). This is the same
// value decode_bits assembles, for ~3 instructions an element instead of ~25: the bit assembly costs
// more ALU work per byte than the memory system leaves time for. Other exponents go to decode_bits.
__host__ __device__ __forceinline__ bool ordinary_exponent(uint32_t e) { return e >= 7u && e != 255u; }

__device__ __forceinline__ float scale_of(uint32_t e) {  // 2^(E-133): float exponent field E - 6
  return __uint_as_float((e - 6u) << 23);
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {  // one cvt for two elements
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// ------------------------------------------------------------------------------------------------
// Fast path. The tensor is viewed as (8, n_vec): column v is the vector x[8v, 8v + 8).
// CTA tiler (8, kVecThreads * kVecUnroll); thread layout (1, kVecThreads): thread t of a tile owns
// columns t, t + 256, ..., t + 7 * 256. A warp instruction then loads 32 consecutive 8-byte vectors
// (256 B) and stores their 32 consecutive 16-byte results (512 B): every 32-byte sector is written
// whole by one instruction. (16 elements a thread would halve the loads but make each store
// instruction write half of every other sector, which measured ~80% of copy instead of ~100%.)
// Decode: the arithmetic form of decode_bits (ordinary_exponent above) when the vector's group allows.
// kGroupsAlignVec: group_size % 8 == 0, so a vector never straddles two groups (one exponent each).
// ------------------------------------------------------------------------------------------------
// kPow2: vectors per group a power of two (group_size 8, 16, 32, ...): the exponent index is a shift, not an
// integer division (which the GPU emulates in ~15 instructions per vector).
template <bool kGroupsAlignVec, bool kPow2, class Index>
__global__ void __launch_bounds__(kVecThreads)
dequant_vec_kernel(int8_t const* __restrict__ x, uint8_t const* __restrict__ scales,
                   uint16_t* __restrict__ y, Index n, Index group_size, int vec_shift) {
  using namespace cute;
  const Index n_vec = n / kVecElems;

  auto layout = make_layout(make_shape(Int<kVecElems>{}, n_vec));    // (8, n_vec):(_1, _8)
  Tensor mX = make_tensor(make_gmem_ptr(x), layout);
  Tensor mY = make_tensor(make_gmem_ptr(y), layout);
  Tensor cX = make_identity_tensor(shape(mX));                        // (i, v) coordinates
  Tensor mS = make_tensor(make_gmem_ptr(scales), make_shape(n / group_size));

  auto cta_tiler = make_shape(Int<kVecElems>{}, Int<kVecThreads * kVecUnroll>{});
  auto thr_layout = make_layout(make_shape(Int<1>{}, Int<kVecThreads>{}));
  const Index n_tiles = (n_vec + kVecThreads * kVecUnroll - 1) / (kVecThreads * kVecUnroll);
  const Index vecs_per_group = group_size / kVecElems;  // used when kGroupsAlignVec

  for (Index tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    Tensor gX = local_tile(mX, cta_tiler, make_coord(_0{}, tile));    // (8, 2048)
    Tensor gY = local_tile(mY, cta_tiler, make_coord(_0{}, tile));
    Tensor gC = local_tile(cX, cta_tiler, make_coord(_0{}, tile));
    Tensor tXgX = local_partition(gX, thr_layout, threadIdx.x);       // (8, kVecUnroll)
    Tensor tXgY = local_partition(gY, thr_layout, threadIdx.x);
    Tensor tXcX = local_partition(gC, thr_layout, threadIdx.x);
    Tensor tXrX = make_tensor<int8_t>(shape(tXgX));                  // registers
    Tensor tXrY = make_tensor<uint16_t>(shape(tXgY));
    uint8_t e_vec[kVecUnroll];

    // 1. Issue every load of this tile before using any (8 x 8 B + exponents in flight).
    CUTE_UNROLL
    for (int u = 0; u < kVecUnroll; ++u) {
      const Index v = get<1>(tXcX(0, u));
      if (v < n_vec) {
        copy(AutoVectorizingCopyWithAssumedAlignment<64>{}, tXgX(_, u), tXrX(_, u));
        if constexpr (kGroupsAlignVec) e_vec[u] = mS(kPow2 ? (v >> vec_shift) : v / vecs_per_group);
      }
    }
    // 2. Decode in registers, 3. one 16-byte store per vector.
    CUTE_UNROLL
    for (int u = 0; u < kVecUnroll; ++u) {
      const Index v = get<1>(tXcX(0, u));
      if (v < n_vec) {
        if constexpr (kGroupsAlignVec) {
          if (ordinary_exponent(e_vec[u])) {   // one exponent per vector: a uniform, almost always taken branch
            const float scale = scale_of(e_vec[u]);
            Tensor tXrY32 = recast<uint32_t>(tXrY(_, u));                   // (4): two bf16 per word
            CUTE_UNROLL
            for (int j = 0; j < kVecElems / 2; ++j) {
              tXrY32(j) = pack_bf16x2(float(tXrX(2 * j, u)) * scale, float(tXrX(2 * j + 1, u)) * scale);
            }
          } else {
            CUTE_UNROLL
            for (int i = 0; i < kVecElems; ++i) tXrY(i, u) = decode_bits(uint8_t(tXrX(i, u)), e_vec[u]);
          }
        } else {
          // Any group size: walk the element index across group boundaries (one division per vector).
          const Index first = v * kVecElems;
          Index q = first / group_size;
          Index r = first - q * group_size;
          CUTE_UNROLL
          for (int i = 0; i < kVecElems; ++i) {
            tXrY(i, u) = decode_bits(uint8_t(tXrX(i, u)), mS(q));
            if (++r == group_size) { r = 0; ++q; }
          }
        }
        copy(AutoVectorizingCopyWithAssumedAlignment<128>{}, tXrY(_, u), tXgY(_, u));
      }
    }
  }
  // The last n % 8 elements (fewer than one vector), scalar.
  const Index tail_start = n_vec * kVecElems;
  if (blockIdx.x == 0 && Index(threadIdx.x) < n - tail_start) {
    const Index i = tail_start + threadIdx.x;
    y[i] = decode_bits(uint8_t(x[i]), scales[i / group_size]);
  }
}

// ------------------------------------------------------------------------------------------------
// The lab's structure. mX = (group_size, num_groups) : (1, group_size); column k is group k and
// shares exponent k. CTA tiler (BLK_M, BLK_K) with BLK_M * BLK_K = 1024; thread layout
// (BLK_M, 256 / BLK_M), column-major: thread t -> (t % BLK_M, t / BLK_M), and local_partition hands
// it the 4 elements (t % BLK_M, t / BLK_M + j * 256 / BLK_M), j = 0..3. Ragged tiles (group_size not a
// multiple of BLK_M, num_groups not a multiple of BLK_K) are predicated with an identity tensor.
// The CTA tiles are walked by a 1-D grid-stride loop: tile = tile_m + tiles_m * tile_k.
// ------------------------------------------------------------------------------------------------
template <int BLK_M>
__global__ void __launch_bounds__(kTileThreads)
dequant_tile_kernel(int8_t const* __restrict__ x, uint8_t const* __restrict__ scales,
                    uint16_t* __restrict__ y, int64_t group_size, int64_t num_groups) {
  using namespace cute;
  constexpr int BLK_K = kTileElems / BLK_M;
  constexpr int THR_M = BLK_M;
  constexpr int THR_K = kTileThreads / BLK_M;
  static_assert(BLK_M * BLK_K == kTileElems && THR_M * THR_K == kTileThreads && BLK_K % THR_K == 0);

  auto shape_x = make_shape(group_size, num_groups);
  Tensor mX = make_tensor(make_gmem_ptr(x), make_layout(shape_x));   // (g, G):(1, g)
  Tensor mY = make_tensor(make_gmem_ptr(y), make_layout(shape_x));
  Tensor mS = make_tensor(make_gmem_ptr(scales), make_shape(num_groups));
  Tensor cX = make_identity_tensor(shape_x);

  auto cta_tiler = make_shape(Int<BLK_M>{}, Int<BLK_K>{});
  auto layout_tX = make_layout(make_shape(Int<THR_M>{}, Int<THR_K>{}));  // column-major threads
  const int64_t tiles_m = (group_size + BLK_M - 1) / BLK_M;
  const int64_t tiles_k = (num_groups + BLK_K - 1) / BLK_K;

  for (int64_t tile = blockIdx.x; tile < tiles_m * tiles_k; tile += gridDim.x) {
    auto cta_coord = make_coord(tile % tiles_m, tile / tiles_m);
    Tensor gX = local_tile(mX, cta_tiler, cta_coord);                  // (BLK_M, BLK_K)
    Tensor gY = local_tile(mY, cta_tiler, cta_coord);
    Tensor gC = local_tile(cX, cta_tiler, cta_coord);
    Tensor tXgX = local_partition(gX, layout_tX, threadIdx.x);          // (1, BLK_K / THR_K)
    Tensor tXgY = local_partition(gY, layout_tX, threadIdx.x);
    Tensor tXcX = local_partition(gC, layout_tX, threadIdx.x);
    CUTE_UNROLL
    for (int i = 0; i < size(tXgX); ++i) {
      if (elem_less(tXcX(i), shape_x)) {                                // inside the tensor?
        tXgY(i) = decode_bits(uint8_t(tXgX(i)), mS(get<1>(tXcX(i))));
      }
    }
  }
}

enum Impl : int { kAuto = 0, kVec = 1, kTile = 2 };

inline bool aligned(void const* p, uintptr_t bytes) { return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0; }

// Whether the fast path's vector accesses are aligned: 8-byte loads of x, 16-byte stores of y.
inline bool vec_aligned(void const* x, void const* y) { return aligned(x, 8) && aligned(y, 16); }

// Which kernel `impl` resolves to for these pointers: kAuto picks kVec when vec_aligned.
inline int resolve_impl(int impl, void const* x, void const* y) {
  if (impl == kAuto) return vec_aligned(x, y) ? kVec : kTile;
  return impl;
}

// Launch `Kernel` with enough CTAs to fill every SM at its occupancy and no more: the kernels' loops
// stride over the remaining tiles. Blocks per SM come once per kernel from the occupancy calculator.
template <auto Kernel, class... Args>
inline void launch_grid_stride(int threads, int64_t tiles, int sm_count, cudaStream_t stream, Args... args) {
  static const int per_sm = [threads] {
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kernel, threads, 0) != cudaSuccess) {
      (void)cudaGetLastError();  // clear it; the launch below reports any real problem
      blocks = 0;
    }
    return blocks > 0 ? blocks : 4;
  }();
  const int64_t cap = int64_t(sm_count > 0 ? sm_count : 1) * per_sm;
  const int grid = int(tiles < cap ? (tiles > 0 ? tiles : 1) : cap);
  Kernel<<<grid, threads, 0, stream>>>(args...);
}

// The fast path: one CTA per tile, 98-99% of copy against 92-94% grid-striding (H100; measured:
// benchmarks/mxint8/mxint8_variants.json).
template <auto Kernel, class Index>
inline void launch_vec(int64_t tiles, int sm_count, cudaStream_t stream, int8_t const* x, uint8_t const* scales,
                       uint16_t* y, Index n, Index group_size, int shift) {
#ifdef LABKIT_MXINT8_VEC_GRID_STRIDE  // variant: as many CTAs as fit at once, striding over the tiles
  launch_grid_stride<Kernel>(kVecThreads, tiles, sm_count, stream, x, scales, y, n, group_size, shift);
#else
  Kernel<<<int(tiles > 0 ? tiles : 1), kVecThreads, 0, stream>>>(x, scales, y, n, group_size, shift);
#endif
}

// Launch on `stream`; returns the launch's error (cudaSuccess or the reason). Preconditions (checked by
// the caller): n > 0, group_size > 0, n % group_size == 0; for kVec, vec_aligned(x, y).
inline cudaError_t launch_dequantize(int8_t const* x, uint8_t const* scales, uint16_t* y, int64_t n,
                                     int64_t group_size, int impl, int sm_count, cudaStream_t stream) {
  impl = resolve_impl(impl, x, y);
  if (impl == kVec) {
    const int64_t n_vec = n / kVecElems;
    const int64_t tiles = (n_vec + kVecThreads * kVecUnroll - 1) / (kVecThreads * kVecUnroll);
    const bool align = group_size % kVecElems == 0;
    const int64_t vpg = align ? group_size / kVecElems : 0;
    int shift = (vpg > 0 && (vpg & (vpg - 1)) == 0) ? __builtin_ctzll(uint64_t(vpg)) : -1;
#ifdef LABKIT_MXINT8_VEC_DIVIDE  // variant: always the division (the kernel before the shift)
    shift = -1;
#endif
    // 32-bit indices where they cannot overflow (cheaper arithmetic); 64-bit beyond.
    if (n < (int64_t(1) << 31)) {
      const uint32_t n32 = uint32_t(n), g32 = uint32_t(group_size);
      if (!align) launch_vec<dequant_vec_kernel<false, false, uint32_t>>(tiles, sm_count, stream, x, scales, y, n32, g32, shift);
      else if (shift >= 0) launch_vec<dequant_vec_kernel<true, true, uint32_t>>(tiles, sm_count, stream, x, scales, y, n32, g32, shift);
      else launch_vec<dequant_vec_kernel<true, false, uint32_t>>(tiles, sm_count, stream, x, scales, y, n32, g32, shift);
    } else {
      if (!align) launch_vec<dequant_vec_kernel<false, false, int64_t>>(tiles, sm_count, stream, x, scales, y, n, group_size, shift);
      else if (shift >= 0) launch_vec<dequant_vec_kernel<true, true, int64_t>>(tiles, sm_count, stream, x, scales, y, n, group_size, shift);
      else launch_vec<dequant_vec_kernel<true, false, int64_t>>(tiles, sm_count, stream, x, scales, y, n, group_size, shift);
    }
  } else if (impl == kTile) {
    const int64_t num_groups = n / group_size;
    // The lab's tile shapes: 8 x 128 up to 128 x 8, BLK_M the largest power of two <= group_size.
    auto launch = [&](auto blk_m) {
      constexpr int BLK_M = decltype(blk_m)::value;
      const int64_t tiles = ((group_size + BLK_M - 1) / BLK_M) * ((num_groups + kTileElems / BLK_M - 1) / (kTileElems / BLK_M));
      launch_grid_stride<dequant_tile_kernel<BLK_M>>(kTileThreads, tiles, sm_count, stream, x, scales, y, group_size, num_groups);
    };
    if (group_size >= 128) launch(cute::Int<128>{});
    else if (group_size >= 64) launch(cute::Int<64>{});
    else if (group_size >= 32) launch(cute::Int<32>{});
    else if (group_size >= 16) launch(cute::Int<16>{});
    else launch(cute::Int<8>{});
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace labkit_mxint8
