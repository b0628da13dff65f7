#include "measure/memory_budget.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tokenmill {

void MemoryBudget::reserve(uint64_t bytes, std::string_view what, std::string_view remedy) {
  if (!fits(bytes))
    fail(
        "bench: {} need {} but only {} of memory are available to this run: {}, or free memory "
        "(--max-memory-gib sets the budget)",
        what, gib(bytes), gib(left_), remedy);
  left_ -= bytes;
}

}  // namespace tokenmill
