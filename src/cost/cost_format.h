// How `tokenmill cost` shows a CostReport: a compact table with the arithmetic beside each
// figure, or JSON with the same numbers (null where a side is not priced).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cost/cost_report.h"

namespace tokenmill {

std::string to_text(const CostReport& report);
nlohmann::json to_json(const CostReport& report);

}  // namespace tokenmill
