#include "measure/memory_budget.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tokenmill {

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1u << 30)); }

void MemoryBudget::reserve(uint64_t bytes, std::string_view what, std::string_view remedy) {
  if (!fits(bytes))
    fail(
        "bench: {} need {} but only {} of memory are available to this run: {}, or free memory "
        "(--max-memory-gib sets the budget)",
        what, gib(bytes), gib(left_), remedy);
  left_ -= bytes;
}

}  // namespace tokenmill
