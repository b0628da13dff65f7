// CudaBackend, the class behind make_cuda_backend(). Its ops are defined by family, each in
// its own file, with the same argument checks as the CPU backend (backend/checks/):
//   cuda_backend.cpp        construction, the stream, device memory, host-to-device copies
//   cuda_memory.cpp         the DeviceMemory that model/ allocates its tensors from
//   cuda_linear_ops.cpp     embedding, matmul, add_lora, convert and their backward (cuBLASLt: gemm_engine.h)
//   cuda_layer_ops.cpp      norms, activations, add, RoPE, softmax and their backward
//   cuda_attention_ops.cpp  attention (contiguous and paged), store_kv, attention backward
//   cuda_training_ops.cpp   cross-entropy, sum of squares, AdamW
// Kernels live in *.cu files behind plain launch functions (*_kernels.h); per-element math
// shared with the CPU tests is in TM_HOST_DEVICE headers (host_device.h).
//
// Every op is queued on stream() and returns without waiting for the GPU, except those
// that return a host value. Results are deterministic: no floating-point atomics, so the
// same inputs give the same bits on the same GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_owners.h"
#include "backend/cuda/device_pool.h"
#include "backend/cuda/host_staging.h"

namespace tokenmill::cuda {

class GemmEngine;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return name_; }
  DeviceMemory& memory() override { return device_memory(device_); }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  // Makes device_ the calling thread's current GPU. Every op starts with it: ops may come
  // from any thread (the server's engine runs on its own), and a kernel launch or cuBLASLt
  // call on a stream of a GPU other than the thread's current one fails.
  void make_current() const;
  DevicePool& pool() { return *pool_; }

  // A device copy of a host span, queued on stream() (the span may be reused at once).
  template <class T>
  DeviceBuffer to_device(std::span<const T> host, const char* what) {
    return copy_to_device(host.data(), host.size_bytes(), what);
  }

  void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override;
  void combine_rows(const Tensor& x, std::span<const int32_t> rows, std::span<const float> scales,
                    const Tensor& y) override;
  void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) override;
  void matmul_shared(const Tensor& x, std::span<const MatmulTarget> targets) override;
  void add_lora(const Tensor& x, std::span<const LoraSegment> segments, const Tensor& y) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override;
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                  const Tensor& y) override;
  void add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight, float eps,
                    const Tensor& y) override;
  void add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight,
                      const Tensor& bias, float eps, const Tensor& y) override;
  void gelu(const Tensor& x, GeluForm form, const Tensor& y) override;
  void silu(const Tensor& x, const Tensor& y) override;
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& y) override;
  void geglu(const Tensor& gate, const Tensor& up, const Tensor& y) override;
  void clamped_swiglu(const Tensor& gate, const Tensor& up, float alpha, float limit,
                      const Tensor& y) override;
  void scale(const Tensor& x, float factor, const Tensor& y) override;
  void softcap(const Tensor& x, float cap, const Tensor& y) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& y) override;
  void rope(const Tensor& x, std::span<const int32_t> positions, const Tensor& inv_freq, RopeLayout layout,
            float magnitude) override;
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t first_pos,
                 const AttentionScores& scores, const Tensor& out) override;
  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                       std::span<const PagedSequence> sequences, const AttentionScores& scores,
                       const Tensor& out) override;
  void store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool) override;
  void convert(const Tensor& x, const Tensor& y) override;
  void softmax(const Tensor& x, const Tensor& y) override;

  void matmul_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor* dx, const Tensor* dw,
                       const Tensor* db) override;
  void embedding_backward(std::span<const int32_t> ids, const Tensor& dout, const Tensor& dtable) override;
  void rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy, const Tensor& dx,
                         const Tensor& dweight, GradWrite dx_write) override;
  void layer_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy,
                           const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                           GradWrite dx_write) override;
  void gelu_backward(const Tensor& x, GeluForm form, const Tensor& dy, const Tensor& dx) override;
  void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                       const Tensor& dup) override;
  void geglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                      const Tensor& dup) override;
  void softcap_backward(const Tensor& y, float cap, const Tensor& dy, const Tensor& dx) override;
  void rope_backward(const Tensor& dx, std::span<const int32_t> positions, const Tensor& inv_freq,
                     RopeLayout layout, float magnitude) override;
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& dout, AttentionScores scores, const Tensor& dq, const Tensor& dk,
                          const Tensor& dv) override;
  void cross_entropy(const Tensor& logits, std::span<const int32_t> targets, float grad_scale,
                     const Tensor& losses, const Tensor* dlogits) override;
  double sum_squares(const Tensor& x) override;
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const AdamW& hyper) override;

 private:
  DeviceBuffer copy_to_device(const void* host, size_t bytes, const char* what);

  int device_;
  // Declared before everything that queues work on the stream: destroyed after all of it.
  StreamOwner owned_stream_;
  cudaStream_t stream_ = nullptr;  // owned_stream_.get(), for the ops
  std::string name_;
  std::unique_ptr<DevicePool> pool_;
  std::unique_ptr<HostStaging> staging_;
  std::unique_ptr<GemmEngine> gemm_;
};

}  // namespace tokenmill::cuda
