// CudaBackend's training ops: cross_entropy, sum_squares, adamw_step (contracts in
// backend.h). The arguments are checked as the CPU backend checks them
// (backend/checks/training_checks.h), then the kernels of training_kernels.cu are queued on
// stream().
#include <cstdint>

#include "backend/checks/training_checks.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/training_kernels.h"

namespace tokenmill::cuda {

void CudaBackend::cross_entropy(const Tensor& logits, std::span<const int32_t> targets, float grad_scale,
                                const Tensor& losses, const Tensor* dlogits) {
  make_current();
  const checks::CrossEntropyDims dims = checks::check_cross_entropy(logits, targets, losses, dlogits);
  const DeviceBuffer device_targets = to_device(targets, "cross_entropy targets");
  launch_cross_entropy(logits.as<const float>(), device_targets.as<const int32_t>(), dims.rows, dims.vocab,
                       grad_scale, losses.as<float>(), dlogits != nullptr ? dlogits->as<float>() : nullptr,
                       stream());
}

double CudaBackend::sum_squares(const Tensor& x) {
  make_current();
  const int64_t count = checks::check_sum_squares(x);
  const auto partials = static_cast<size_t>(sum_geometry(count).blocks);
  // The partials, then the total at the end.
  const DeviceBuffer scratch = pool().allocate((partials + 1) * sizeof(double), "sum_squares partial sums");
  double* total = scratch.as<double>() + partials;
  launch_sum_squares(x.as<const float>(), count, scratch.as<double>(), total, stream());
  double result = 0.0;
  TM_CUDA_CHECK(cudaMemcpyAsync(&result, total, sizeof(double), cudaMemcpyDeviceToHost, stream()));
  TM_CUDA_CHECK(cudaStreamSynchronize(stream()));
  return result;
}

void CudaBackend::adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                             const AdamW& hyper) {
  make_current();
  const int64_t count = checks::check_adamw_step(param, grad, m, v, hyper);
  const AdamWScalars scalars = adamw_scalars(hyper.lr, hyper.beta1, hyper.beta2, hyper.eps,
                                             hyper.weight_decay, hyper.step, hyper.grad_scale);
  launch_adamw(param.as<float>(), grad.as<const float>(), m.as<float>(), v.as<float>(), count, scalars,
               stream());
}

}  // namespace tokenmill::cuda
