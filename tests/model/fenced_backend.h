// FencedBackend: the CPU backend behind a "device" memory that the host cannot touch, to
// prove on a machine without a GPU that model/ reaches backend memory only through ops and
// DeviceMemory's copies (as a GPU backend requires).
//
// Its memory() hands out whole pages (mmap) kept PROT_NONE. Each op makes every page
// readable and writable, runs the CPU backend's op, and fences them again; the copies open
// them for the memcpy alone. Any other host access to backend memory (a weight read from
// the mapped file instead of its placed copy, logits read without copy_to_host, a cache
// written with std::copy) is a SIGSEGV: the test dies instead of passing.
#pragma once

#include <sys/mman.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "backend/backend.h"
#include "core/error.h"

namespace tokenmill::testing {

class FencedMemory final : public DeviceMemory {
 public:
  ~FencedMemory() override {
    for (const auto& [base, bytes] : regions_) munmap(base, bytes);
  }

  bool is_host() const override { return false; }
  void* allocate(size_t bytes) override {
    const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    void* p = mmap(nullptr, rounded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("FencedMemory: mmap of {} bytes failed", rounded);
    regions_[static_cast<char*>(p)] = rounded;
    ++allocations_;
    return p;
  }
  void free(void* memory) noexcept override {
    const auto it = regions_.find(static_cast<char*>(memory));
    if (it == regions_.end()) return;
    munmap(it->first, it->second);
    regions_.erase(it);
  }
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override {
    Open open(*this);
    std::memcpy(dst, host_src, bytes);
    bytes_in_ += bytes;
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    Open open(*this);
    std::memcpy(host_dst, src, bytes);
    bytes_out_ += bytes;
  }
  // Its pages come from the host's memory, unless a test says the device has less.
  uint64_t available() const override { return limit_ ? *limit_ : host_memory().available(); }
  void set_available(std::optional<uint64_t> bytes) { limit_ = bytes; }

  // Every region readable and writable while alive.
  class Open {
   public:
    explicit Open(FencedMemory& m) : memory_(m) { memory_.protect(PROT_READ | PROT_WRITE); }
    ~Open() { memory_.protect(PROT_NONE); }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    FencedMemory& memory_;
  };

  int allocations() const { return allocations_; }
  size_t bytes_in() const { return bytes_in_; }
  size_t bytes_out() const { return bytes_out_; }
  bool owns(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    for (const auto& [base, bytes] : regions_)
      if (c >= base && c < base + bytes) return true;
    return false;
  }

 private:
  static constexpr size_t kPage = 4096;
  void protect(int flags) {
    for (const auto& [base, bytes] : regions_) mprotect(base, bytes, flags);
  }

  std::map<char*, size_t> regions_;
  std::optional<uint64_t> limit_;
  int allocations_ = 0;
  size_t bytes_in_ = 0, bytes_out_ = 0;
};

class FencedBackend final : public Backend {
 public:
  explicit FencedBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string_view name() const override { return "fenced-cpu"; }
  DeviceMemory& memory() override { return memory_; }
  FencedMemory& fenced_memory() { return memory_; }

  void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override {
    run([&] { inner_->embedding(table, ids, out); });
  }
  void combine_rows(const Tensor& x, std::span<const int32_t> rows, std::span<const float> scales,
                    const Tensor& y) override {
    run([&] { inner_->combine_rows(x, rows, scales, y); });
  }
  void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) override {
    run([&] { inner_->matmul(x, w, bias, y); });
  }
  void matmul_shared(const Tensor& x, std::span<const MatmulTarget> targets) override {
    run([&] { inner_->matmul_shared(x, targets); });
  }
  void matmul_many(std::span<const MatmulProduct> products) override {
    run([&] { inner_->matmul_many(products); });
  }
  void add_lora(const Tensor& x, std::span<const LoraSegment> segments, const Tensor& y) override {
    run([&] { inner_->add_lora(x, segments, y); });
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override {
    run([&] { inner_->rms_norm(x, weight, eps, y); });
  }
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                  const Tensor& y) override {
    run([&] { inner_->layer_norm(x, weight, bias, eps, y); });
  }
  void add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight, float eps,
                    const Tensor& y) override {
    run([&] { inner_->add_rms_norm(a, b, sum, weight, eps, y); });
  }
  void add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight,
                      const Tensor& bias, float eps, const Tensor& y) override {
    run([&] { inner_->add_layer_norm(a, b, sum, weight, bias, eps, y); });
  }
  void gelu(const Tensor& x, GeluForm form, const Tensor& y) override {
    run([&] { inner_->gelu(x, form, y); });
  }
  void silu(const Tensor& x, const Tensor& y) override {
    run([&] { inner_->silu(x, y); });
  }
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& y) override {
    run([&] { inner_->swiglu(gate, up, y); });
  }
  void geglu(const Tensor& gate, const Tensor& up, const Tensor& y) override {
    run([&] { inner_->geglu(gate, up, y); });
  }
  void clamped_swiglu(const Tensor& gate, const Tensor& up, float alpha, float limit,
                      const Tensor& y) override {
    run([&] { inner_->clamped_swiglu(gate, up, alpha, limit, y); });
  }
  void softcap(const Tensor& x, float cap, const Tensor& y) override {
    run([&] { inner_->softcap(x, cap, y); });
  }
  void scale(const Tensor& x, float factor, const Tensor& y) override {
    run([&] { inner_->scale(x, factor, y); });
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& y) override {
    run([&] { inner_->add(a, b, y); });
  }
  void rope(const Tensor& x, std::span<const int32_t> positions, const Tensor& inv_freq, RopeLayout layout,
            float magnitude) override {
    run([&] { inner_->rope(x, positions, inv_freq, layout, magnitude); });
  }
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t first_pos,
                 const AttentionScores& scores, const Tensor& out) override {
    run([&] { inner_->attention(q, k_cache, v_cache, first_pos, scores, out); });
  }
  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                       std::span<const PagedSequence> sequences, const AttentionScores& scores,
                       const Tensor& out) override {
    run([&] { inner_->paged_attention(q, k_pool, v_pool, sequences, scores, out); });
  }
  void store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool) override {
    run([&] { inner_->store_kv(rows, slots, pool); });
  }
  void convert(const Tensor& x, const Tensor& y) override {
    run([&] { inner_->convert(x, y); });
  }
  void softmax(const Tensor& x, const Tensor& y) override {
    run([&] { inner_->softmax(x, y); });
  }

  // Training ops: what tests/train/device_training_test.cpp runs.
  void matmul_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor* dx, const Tensor* dw,
                       const Tensor* db) override {
    run([&] { inner_->matmul_backward(x, w, dy, dx, dw, db); });
  }
  void embedding_backward(std::span<const int32_t> ids, const Tensor& dout, const Tensor& dtable) override {
    run([&] { inner_->embedding_backward(ids, dout, dtable); });
  }
  void rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy, const Tensor& dx,
                         const Tensor& dweight, GradWrite dx_write) override {
    run([&] { inner_->rms_norm_backward(x, weight, eps, dy, dx, dweight, dx_write); });
  }
  void layer_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy,
                           const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                           GradWrite dx_write) override {
    run([&] { inner_->layer_norm_backward(x, weight, eps, dy, dx, dweight, dbias, dx_write); });
  }
  void gelu_backward(const Tensor& x, GeluForm form, const Tensor& dy, const Tensor& dx) override {
    run([&] { inner_->gelu_backward(x, form, dy, dx); });
  }
  void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                       const Tensor& dup) override {
    run([&] { inner_->swiglu_backward(gate, up, dy, dgate, dup); });
  }
  void geglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                      const Tensor& dup) override {
    run([&] { inner_->geglu_backward(gate, up, dy, dgate, dup); });
  }
  void softcap_backward(const Tensor& y, float cap, const Tensor& dy, const Tensor& dx) override {
    run([&] { inner_->softcap_backward(y, cap, dy, dx); });
  }
  void rope_backward(const Tensor& dx, std::span<const int32_t> positions, const Tensor& inv_freq,
                     RopeLayout layout, float magnitude) override {
    run([&] { inner_->rope_backward(dx, positions, inv_freq, layout, magnitude); });
  }
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& dout, AttentionScores scores, const Tensor& dq, const Tensor& dk,
                          const Tensor& dv) override {
    run([&] { inner_->attention_backward(q, k, v, out, dout, scores, dq, dk, dv); });
  }
  void cross_entropy(const Tensor& logits, std::span<const int32_t> targets, float grad_scale,
                     const Tensor& losses, const Tensor* dlogits) override {
    run([&] { inner_->cross_entropy(logits, targets, grad_scale, losses, dlogits); });
  }
  double sum_squares(const Tensor& x) override {
    FencedMemory::Open open(memory_);
    return inner_->sum_squares(x);
  }
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const AdamW& hyper) override {
    run([&] { inner_->adamw_step(param, grad, m, v, hyper); });
  }

  int ops() const { return ops_; }

 private:
  template <class F>
  void run(F&& op) {
    FencedMemory::Open open(memory_);
    ++ops_;
    op();
  }

  std::unique_ptr<Backend> inner_;
  FencedMemory memory_;
  int ops_ = 0;
};

}  // namespace tokenmill::testing
