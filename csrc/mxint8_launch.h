// The one entry point between the CuTe kernels (mxint8_kernels.cu) and the torch binding
// (mxint8_torch.cpp): plain C++ types only, so the binding compiles without CuTe and the kernels
// without torch.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace labkit_mxint8 {

// Dequantize n MXINT8 elements (x: int8 mantissas, scales: one uint8 exponent per group_size
// elements) to bf16 bit patterns in y, on `stream`. impl: 0 auto, 1 vectorised, 2 lab-structure tile
// kernel. Returns the launch's cudaError_t (cudaSuccess, or why the launch failed).
cudaError_t dequantize_launch(int8_t const* x, uint8_t const* scales, uint16_t* y, int64_t n,
                              int64_t group_size, int impl, int sm_count, cudaStream_t stream);

// The kernel `impl` resolves to for these pointers (auto -> 1 when x is 8-byte and y 16-byte aligned,
// else 2).
int dequantize_resolve_impl(int impl, void const* x, void const* y);

}  // namespace labkit_mxint8
