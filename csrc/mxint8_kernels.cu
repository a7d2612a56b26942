// Instantiates the CuTe kernels of mxint8_dequant.cuh behind the plain entry point of mxint8_launch.h.
// Compiles with nvcc, the CUTLASS headers and nothing of torch (tests/kernels/test_mxint8.py compile-checks it).
#include "mxint8_dequant.cuh"
#include "mxint8_launch.h"

namespace labkit_mxint8 {

cudaError_t dequantize_launch(int8_t const* x, uint8_t const* scales, uint16_t* y, int64_t n,
                              int64_t group_size, int impl, int sm_count, cudaStream_t stream) {
  return launch_dequantize(x, scales, y, n, group_size, impl, sm_count, stream);
}

int dequantize_resolve_impl(int impl, void const* x, void const* y) { return resolve_impl(impl, x, y); }

}  // namespace labkit_mxint8
