// The PyTorch custom op labkit_mxint8::dequantize (CUDA), around the CuTe kernels of mxint8_kernels.cu.
//
// Registered with TORCH_LIBRARY so that torch.compile can call it; its fake (meta) implementation is
// registered from Python (labkit/kernels/extension.py). Every input is validated with an error naming
// the argument, and every launch's status is checked.
#include <Python.h>

#include <array>
#include <atomic>
#include <string>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cuda_runtime_api.h>

#include "mxint8_launch.h"

namespace {

// SMs of `device`, asked once per device (the grid is sized from it).
int multiprocessor_count(int device) {
  static std::array<std::atomic<int>, 64> cache{};
  if (device < 0 || device >= static_cast<int>(cache.size())) device = 0;
  int count = cache[device].load(std::memory_order_relaxed);
  if (count == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    cache[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

// Messages are assembled from std::string pieces (std::to_string for numbers), not streamed through
// TORCH_CHECK's variadic formatting: on the GPU image this was tested on (torch 2.11.0+cu130, g++ 13.3),
// the variadic form with int64 arguments segfaulted the process at the group-size check instead of raising;
// this form raises (tests/kernels/test_mxint8.py::test_op_validates_inputs_with_clear_errors). Cause not established.
std::string num(int64_t v) { return std::to_string(v); }

at::Tensor dequantize_cuda(const at::Tensor& mantissa, const at::Tensor& exponent, int64_t group_size,
                           int64_t impl) {
  const std::string op = "labkit_mxint8::dequantize: ";
  TORCH_CHECK(impl >= 0 && impl <= 2, op + "impl=" + num(impl) +
              "; allowed values: 0 (auto), 1 (vectorised), 2 (lab-structure tile kernel)");
  TORCH_CHECK(mantissa.scalar_type() == at::kChar,
              op + "mantissa must be torch.int8, got " + c10::toString(mantissa.scalar_type()));
  TORCH_CHECK(exponent.scalar_type() == at::kByte,
              op + "exponent must be torch.uint8, got " + c10::toString(exponent.scalar_type()));
  TORCH_CHECK(mantissa.is_cuda() && exponent.is_cuda(), op + "mantissa and exponent must be CUDA tensors, got " +
              mantissa.device().str() + " and " + exponent.device().str());
  TORCH_CHECK(mantissa.device() == exponent.device(), op + "mantissa is on " + mantissa.device().str() +
              " but exponent on " + exponent.device().str());
  TORCH_CHECK(mantissa.is_contiguous() && exponent.is_contiguous(),
              op + "mantissa and exponent must be contiguous (call .contiguous())");
  TORCH_CHECK(mantissa.dim() >= 1, op + "mantissa must have at least one dimension");
  TORCH_CHECK(group_size >= 1, op + "group_size=" + num(group_size) + " must be >= 1");
  const int64_t last = mantissa.size(-1);
  TORCH_CHECK(last % group_size == 0, op + "group_size=" + num(group_size) +
              " must divide the last dimension of mantissa (" + num(last) + ")");
  const int64_t n = mantissa.numel();
  TORCH_CHECK(exponent.numel() == n / group_size, op + "exponent has " + num(exponent.numel()) +
              " elements; expected mantissa.numel() / group_size = " + num(n / group_size));

  const c10::cuda::CUDAGuard guard(mantissa.device());
  at::Tensor out = at::empty(mantissa.sizes(), mantissa.options().dtype(at::kBFloat16));
  if (n == 0) return out;  // a grid of zero blocks is a launch error: nothing to do

  const void* x = mantissa.const_data_ptr();
  void* y = out.data_ptr();  // fresh from the allocator: 16-byte aligned
  TORCH_CHECK(impl != 1 || (reinterpret_cast<uintptr_t>(x) & 7u) == 0,
              op + "impl=1 (vectorised) needs an 8-byte aligned mantissa (this one starts at a storage "
              "offset); use impl=0 (auto), which then runs impl=2");
  const int sm_count = multiprocessor_count(mantissa.device().index());
  const cudaError_t err = labkit_mxint8::dequantize_launch(
      static_cast<const int8_t*>(x), static_cast<const uint8_t*>(exponent.const_data_ptr()),
      static_cast<uint16_t*>(y), n, group_size, static_cast<int>(impl), sm_count,
      c10::cuda::getCurrentCUDAStream(mantissa.device().index()).stream());
  C10_CUDA_CHECK(err);  // the launch's own status (bad configuration, no kernel image for this GPU, ...)
  return out;
}

}  // namespace

TORCH_LIBRARY(labkit_mxint8, m) {
  m.def("dequantize(Tensor mantissa, Tensor exponent, int group_size, int impl=0) -> Tensor");
}

TORCH_LIBRARY_IMPL(labkit_mxint8, CUDA, m) {
  m.impl("dequantize", &dequantize_cuda);
}

// An empty Python module, so that a setup.py build (labkit._mxint8_cuda) can be imported; importing it
// (or torch.ops.load_library on a JIT build) runs the registrations above.
#define LABKIT_CONCAT_(a, b) a##b
#define LABKIT_CONCAT(a, b) LABKIT_CONCAT_(a, b)
extern "C" PyMODINIT_FUNC LABKIT_CONCAT(PyInit_, TORCH_EXTENSION_NAME)(void) {
  static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "labkit_mxint8", nullptr, -1, nullptr};
  return PyModule_Create(&module);
}
