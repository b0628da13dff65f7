// CudaBackend's layer ops: norms, activations, add, RoPE, softmax and their backward. The
// arguments are checked as the CPU backend checks them (backend/checks/layer_checks.h); the
// kernels are queued on stream() (norm_kernels.h, softmax_kernels.h, pointwise_kernels.h,
// rope_kernels.h).
#include <cstdint>

#include "backend/checks/layer_checks.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/layer_geometry.h"
#include "backend/cuda/norm_kernels.h"
#include "backend/cuda/pointwise_kernels.h"
#include "backend/cuda/rope_kernels.h"
#include "backend/cuda/softmax_kernels.h"

namespace tokenmill::cuda {

using checks::RowDims;

namespace {

// rope (inverse false) and rope_backward (true) of x, named `name` in messages.
void rotate(CudaBackend& backend, const char* op, const char* name, const Tensor& x,
            std::span<const int32_t> positions, const Tensor& inv_freq, RopeLayout layout, float magnitude,
            bool inverse) {
  const checks::RopeDims dims = checks::check_rope(op, name, x, positions, inv_freq, magnitude);
  const DeviceBuffer device_positions = backend.to_device(positions, "RoPE positions");
  launch_rope(x.as<float>(), device_positions.as<const int32_t>(), inv_freq.as<const float>(), dims.n,
              dims.heads, dims.head_dim, dims.half, {layout == RopeLayout::Neox, inverse, magnitude},
              backend.stream());
}

// The rows of add_rms_norm / add_layer_norm: sum = a + b, written by the norm kernel.
NormRows residual_rows(const Tensor& a, const Tensor& b, const Tensor& sum) {
  return {a.as<const float>(), b.as<const float>(), sum.as<float>()};
}

}  // namespace

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
  make_current();
  const RowDims dims = checks::check_norm("rms_norm", x, weight, nullptr, y);
  launch_rms_norm({x.as<const float>()}, weight.data, weight.dtype, eps, dims.rows, dims.d, y.as<float>(),
                  stream_);
}

void CudaBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                             const Tensor& y) {
  make_current();
  const RowDims dims = checks::check_norm("layer_norm", x, weight, &bias, y);
  launch_layer_norm({x.as<const float>()}, weight.data, weight.dtype, bias.data, bias.dtype, eps, dims.rows,
                    dims.d, y.as<float>(), stream_);
}

void CudaBackend::add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight,
                               float eps, const Tensor& y) {
  make_current();
  const RowDims dims = checks::check_add_norm("add_rms_norm", a, b, sum, weight, nullptr, y);
  launch_rms_norm(residual_rows(a, b, sum), weight.data, weight.dtype, eps, dims.rows, dims.d, y.as<float>(),
                  stream_);
}

void CudaBackend::add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight,
                                 const Tensor& bias, float eps, const Tensor& y) {
  make_current();
  const RowDims dims = checks::check_add_norm("add_layer_norm", a, b, sum, weight, &bias, y);
  launch_layer_norm(residual_rows(a, b, sum), weight.data, weight.dtype, bias.data, bias.dtype, eps,
                    dims.rows, dims.d, y.as<float>(), stream_);
}

void CudaBackend::gelu(const Tensor& x, GeluForm form, const Tensor& y) {
  make_current();
  const int64_t count = checks::check_unary("gelu", x, y);
  launch_gelu(x.as<const float>(), form == GeluForm::Tanh, count, y.as<float>(), stream_);
}

void CudaBackend::silu(const Tensor& x, const Tensor& y) {
  make_current();
  const int64_t count = checks::check_unary("silu", x, y);
  launch_silu(x.as<const float>(), count, y.as<float>(), stream_);
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, const Tensor& y) {
  make_current();
  const int64_t count = checks::check_binary("swiglu", gate, up, y);
  launch_swiglu(gate.as<const float>(), up.as<const float>(), count, y.as<float>(), stream_);
}

void CudaBackend::geglu(const Tensor& gate, const Tensor& up, const Tensor& y) {
  make_current();
  const int64_t count = checks::check_binary("geglu", gate, up, y);
  launch_geglu(gate.as<const float>(), up.as<const float>(), count, y.as<float>(), stream_);
}

void CudaBackend::clamped_swiglu(const Tensor& gate, const Tensor& up, float alpha, float limit,
                                 const Tensor& y) {
  make_current();
  checks::check_clamped_swiglu(alpha, limit);
  const int64_t count = checks::check_binary("clamped_swiglu", gate, up, y);
  launch_clamped_swiglu(gate.as<const float>(), up.as<const float>(), count, alpha, limit, y.as<float>(),
                        stream_);
}

void CudaBackend::scale(const Tensor& x, float factor, const Tensor& y) {
  make_current();
  const int64_t count = checks::check_unary("scale", x, y);
  launch_scale(x.as<const float>(), factor, count, y.as<float>(), stream_);
}

void CudaBackend::softcap(const Tensor& x, float cap, const Tensor& y) {
  make_current();
  checks::check_softcap(cap);
  const int64_t count = checks::check_unary("softcap", x, y);
  launch_softcap(x.as<const float>(), cap, count, y.as<float>(), stream_);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, const Tensor& y) {
  make_current();
  const int64_t count = checks::check_binary("add", a, b, y);
  launch_add(a.as<const float>(), b.as<const float>(), count, y.as<float>(), stream_);
}

void CudaBackend::rope(const Tensor& x, std::span<const int32_t> positions, const Tensor& inv_freq,
                       RopeLayout layout, float magnitude) {
  make_current();
  rotate(*this, "rope", "x", x, positions, inv_freq, layout, magnitude, /*inverse=*/false);
}

void CudaBackend::softmax(const Tensor& x, const Tensor& y) {
  make_current();
  const RowDims dims = checks::check_rows("softmax", x, y);
  launch_softmax(x.as<const float>(), dims.rows, dims.d, y.as<float>(), stream_);
}

void CudaBackend::rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy,
                                    const Tensor& dx, const Tensor& dweight, GradWrite dx_write) {
  make_current();
  const RowDims dims = checks::check_norm_backward("rms_norm_backward", x, weight, dy, dx, dweight, nullptr);
  const DeviceBuffer scratch = pool().allocate(
      sizeof(double) * static_cast<size_t>(norm_backward_scratch_doubles(dims.rows, dims.d, 1)),
      "rms_norm_backward scratch");
  launch_rms_norm_backward(x.as<const float>(), weight.data, weight.dtype, eps, dy.as<const float>(),
                           dims.rows, dims.d, dx_write == GradWrite::Accumulate, dx.as<float>(),
                           dweight.as<float>(), scratch.as<double>(), stream_);
}

void CudaBackend::layer_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy,
                                      const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                                      GradWrite dx_write) {
  make_current();
  const RowDims dims = checks::check_norm_backward("layer_norm_backward", x, weight, dy, dx, dweight, &dbias);
  const DeviceBuffer scratch = pool().allocate(
      sizeof(double) * static_cast<size_t>(norm_backward_scratch_doubles(dims.rows, dims.d, 2)),
      "layer_norm_backward scratch");
  launch_layer_norm_backward(x.as<const float>(), weight.data, weight.dtype, eps, dy.as<const float>(),
                             dims.rows, dims.d, dx_write == GradWrite::Accumulate, dx.as<float>(),
                             dweight.as<float>(), dbias.as<float>(), scratch.as<double>(), stream_);
}

void CudaBackend::gelu_backward(const Tensor& x, GeluForm form, const Tensor& dy, const Tensor& dx) {
  make_current();
  const int64_t count = checks::check_gelu_backward("gelu_backward", x, dy, dx);
  launch_gelu_backward(x.as<const float>(), form == GeluForm::Tanh, dy.as<const float>(), count,
                       dx.as<float>(), stream_);
}

void CudaBackend::swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                                  const Tensor& dup) {
  make_current();
  const int64_t count = checks::check_swiglu_backward("swiglu_backward", gate, up, dy, dgate, dup);
  launch_gated_backward(false, gate.as<const float>(), up.as<const float>(), dy.as<const float>(), count,
                        dgate.as<float>(), dup.as<float>(), stream_);
}

void CudaBackend::geglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                                 const Tensor& dup) {
  make_current();
  const int64_t count = checks::check_swiglu_backward("geglu_backward", gate, up, dy, dgate, dup);
  launch_gated_backward(true, gate.as<const float>(), up.as<const float>(), dy.as<const float>(), count,
                        dgate.as<float>(), dup.as<float>(), stream_);
}

void CudaBackend::softcap_backward(const Tensor& y, float cap, const Tensor& dy, const Tensor& dx) {
  make_current();
  const int64_t count = checks::check_softcap_backward(cap, y, dy, dx);
  launch_softcap_backward(y.as<const float>(), cap, dy.as<const float>(), count, dx.as<float>(), stream_);
}

void CudaBackend::rope_backward(const Tensor& dx, std::span<const int32_t> positions, const Tensor& inv_freq,
                                RopeLayout layout, float magnitude) {
  make_current();
  rotate(*this, "rope_backward", "dx", dx, positions, inv_freq, layout, magnitude, /*inverse=*/true);
}

}  // namespace tokenmill::cuda
