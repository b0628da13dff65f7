#include "backend/backend.h"

#include "backend/checks/linear_checks.h"

namespace tokenmill {

void Backend::matmul_shared(const Tensor& x, std::span<const MatmulTarget> targets) {
  checks::check_matmul_shared(x, targets);
  for (const MatmulTarget& t : targets) matmul(x, *t.w, t.bias, *t.y);
}

void Backend::matmul_many(std::span<const MatmulProduct> products) {
  checks::check_matmul_many(products);
  for (const MatmulProduct& p : products) matmul(*p.x, *p.w, p.bias, *p.y);
}

}  // namespace tokenmill
