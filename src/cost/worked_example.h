// The worked example of issue #7: a month of fine-tuning at 6 hours a day (180 hours) on a
// 700 W machine at 0.6 per kWh, amortised over three years, against renting the same GPU.
// Purchase and cloud prices are the H100 SXM preset's (700 W is that GPU's board power).
#pragma once

#include "cost/cost_request.h"

namespace tokenmill {

// The example as a request: flags the user gives on top replace its fields (with_defaults).
CostRequest worked_example_request();

}  // namespace tokenmill
