// Prototype: MXINT8 weight-only GEMV for 1-4 rows of x (bf16), fp32 accumulation, bf16 out.
// y[m, n] = sum_k x[m, k] * m8[n, k] * 2^(E[n, k/32] - 133). Group 32, K % 512 == 0.
// Each warp streams ROWS rows of W with 16-byte loads (lane l: bytes 16l.. of each 512-byte step, inside one
// group); x sits in shared memory as fp32, permuted so that every LDS.128 of a warp reads 512 contiguous bytes.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

__device__ __forceinline__ float scale_of(uint32_t e) {
  // 2^(e-133) for e in 0..254 (fp32 normal for e >= 7, subnormal below); NaN for 255
  if (e == 255) return __int_as_float(0x7fc00000);
  if (e >= 7) return __int_as_float((int)(e - 6) << 23);
  return __int_as_float(1 << (e + 16));
}

__device__ __forceinline__ void decode4(uint32_t word, float* out) {
  uint32_t t = word ^ 0x80808080u;
  out[0] = __int_as_float(__byte_perm(t, 0x4B000000u, 0x7440)) - 8388736.0f;
  out[1] = __int_as_float(__byte_perm(t, 0x4B000000u, 0x7441)) - 8388736.0f;
  out[2] = __int_as_float(__byte_perm(t, 0x4B000000u, 0x7442)) - 8388736.0f;
  out[3] = __int_as_float(__byte_perm(t, 0x4B000000u, 0x7443)) - 8388736.0f;
}

template <int M, int ROWS, int U>
__global__ void __launch_bounds__(256) mx_gemv_kernel(const __nv_bfloat16* __restrict__ x, const int8_t* __restrict__ w,
                                                      const uint8_t* __restrict__ ex, __nv_bfloat16* __restrict__ y,
                                                      int N, int K) {
  extern __shared__ float4 xs[];  // [M][K/512][4][32] float4: (m, step, j, lane) -> x[m, 512 step + 16 lane + 4 j ..]
  const int steps = K / 512;
  for (int i = threadIdx.x; i < M * K / 4; i += blockDim.x) {  // i: one float4 of the permuted layout
    int lane = i & 31, j = (i >> 5) & 3, rest = i >> 7;  // rest = m * steps + step
    int m = rest / steps, step = rest - m * steps;
    const __nv_bfloat16* src = x + (size_t)m * K + step * 512 + lane * 16 + j * 4;
    uint2 raw = *reinterpret_cast<const uint2*>(src);
    float4 f;
    f.x = __uint_as_float(raw.x << 16); f.y = __uint_as_float(raw.x & 0xffff0000u);
    f.z = __uint_as_float(raw.y << 16); f.w = __uint_as_float(raw.y & 0xffff0000u);
    xs[i] = f;
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row0 = (blockIdx.x * 8 + warp) * ROWS;
  float acc[ROWS][M];
#pragma unroll
  for (int r = 0; r < ROWS; r++)
#pragma unroll
    for (int m = 0; m < M; m++) acc[r][m] = 0.f;
  const int G = K / 32;
  for (int s0 = 0; s0 < steps; s0 += U) {
    uint4 q[ROWS][U];
    uint32_t eb[ROWS][U];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      int n = min(row0 + r, N - 1);
#pragma unroll
      for (int u = 0; u < U; u++) {
        int s = min(s0 + u, steps - 1);
        q[r][u] = __ldg(reinterpret_cast<const uint4*>(w + (size_t)n * K + s * 512 + lane * 16));
        eb[r][u] = __ldg(ex + (size_t)n * G + s * 16 + (lane >> 1));
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (s0 + u >= steps) break;
      const int s = s0 + u;
#pragma unroll
      for (int r = 0; r < ROWS; r++) {
        float wv[16];
        decode4(q[r][u].x, wv); decode4(q[r][u].y, wv + 4); decode4(q[r][u].z, wv + 8); decode4(q[r][u].w, wv + 12);
        float sc = scale_of(eb[r][u]);
#pragma unroll
        for (int m = 0; m < M; m++) {
          float part = 0.f;
#pragma unroll
          for (int j = 0; j < 4; j++) {
            float4 xv = xs[((m * steps + s) * 4 + j) * 32 + lane];
            part = fmaf(wv[4 * j + 0], xv.x, part);
            part = fmaf(wv[4 * j + 1], xv.y, part);
            part = fmaf(wv[4 * j + 2], xv.z, part);
            part = fmaf(wv[4 * j + 3], xv.w, part);
          }
          acc[r][m] = fmaf(part, sc, acc[r][m]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < ROWS; r++)
#pragma unroll
    for (int m = 0; m < M; m++) {
      float v = acc[r][m];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      int n = row0 + r;
      if (lane == 0 && n < N) y[(size_t)m * N + n] = __float2bfloat16(v);
    }
}

template <int M, int ROWS, int U>
static int launch(const void* x, const void* w, const void* e, void* y, int N, int K, cudaStream_t st) {
  size_t smem = (size_t)M * K * 4;
  auto kern = mx_gemv_kernel<M, ROWS, U>;
  if (smem > 48 * 1024) cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  int blocks = (N + 8 * ROWS - 1) / (8 * ROWS);
  kern<<<blocks, 256, smem, st>>>((const __nv_bfloat16*)x, (const int8_t*)w, (const uint8_t*)e, (__nv_bfloat16*)y, N, K);
  return (int)cudaGetLastError();
}

extern "C" int mx_gemv(const void* x, const void* w, const void* e, void* y, int M, int N, int K, int rows, int unroll,
                       void* stream) {
  cudaStream_t st = (cudaStream_t)stream;
  if (K % 512 || M * K * 4 > 200 * 1024) return -1;
#define CASE(MM, RR, UU) if (M == MM && rows == RR && unroll == UU) return launch<MM, RR, UU>(x, w, e, y, N, K, st);
  CASE(1, 2, 4) CASE(1, 4, 2) CASE(1, 4, 4) CASE(1, 2, 8)
  CASE(2, 2, 4) CASE(2, 4, 2)
  CASE(4, 2, 4) CASE(4, 4, 2) CASE(4, 2, 2) CASE(4, 1, 4) CASE(4, 2, 8)
#undef CASE
  return -2;
}
