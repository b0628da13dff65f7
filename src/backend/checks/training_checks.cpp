#include "backend/checks/training_checks.h"

#include "backend/checks/shape_checks.h"
#include "core/error.h"

namespace tokenmill::checks {

CrossEntropyDims check_cross_entropy(const Tensor& logits, std::span<const int32_t> targets,
                                     const Tensor& losses, const Tensor* dlogits) {
  const char* op = "cross_entropy";
  const CrossEntropyDims dims{.rows = logits.rows(), .vocab = logits.cols()};
  expect_f32(op, "logits", logits);
  if (static_cast<int64_t>(targets.size()) != dims.rows)
    fail("{}: {} targets for logits {}; need one per row", op, targets.size(), logits.shape_string());
  expect_f32_count(op, "losses", losses, dims.rows);
  if (dlogits != nullptr) expect_f32_matrix(op, "dlogits", *dlogits, dims.rows, dims.vocab);
  // dlogits may be logits itself (each row is read before it is overwritten).
  const bool in_place = dlogits != nullptr && dlogits->data == logits.data;
  expect_disjoint(op, {{"losses", losses}, {"dlogits", in_place ? nullptr : dlogits}}, {{"logits", logits}});
  for (size_t t = 0; t < targets.size(); ++t)
    if (targets[t] >= dims.vocab)
      fail("{}: target {} of row {} is outside the vocabulary [0, {})", op, targets[t], t, dims.vocab);
  return dims;
}

int64_t check_sum_squares(const Tensor& x) {
  expect_f32("sum_squares", "x", x);
  return x.numel();
}

int64_t check_adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                         const Backend::AdamW& hyper) {
  const char* op = "adamw_step";
  const int64_t count = param.numel();
  expect_f32(op, "param", param);
  expect_f32_count(op, "grad", grad, count);
  expect_f32_count(op, "m", m, count);
  expect_f32_count(op, "v", v, count);
  expect_disjoint(op, {{"param", param}, {"m", m}, {"v", v}}, {{"grad", grad}});
  if (hyper.step < 1) fail("{}: step is {}; the first step is 1", op, hyper.step);
  return count;
}

}  // namespace tokenmill::checks
