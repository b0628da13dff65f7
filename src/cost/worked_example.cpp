#include "cost/worked_example.h"

namespace tokenmill {

CostRequest worked_example_request() {
  CostRequest r;
  r.title =
      "worked example: a month of fine-tuning at 6 h/day (180 h), 700 W at 0.6 per kWh, "
      "3-year amortisation, owned vs rented H100 SXM";
  r.preset = "h100-sxm";
  r.power_watts = 700;
  r.kwh_price = 0.6;
  r.years = 3;
  r.hours_per_day = 6;  // utilisation 6 / 24 = 0.25 of the amortisation period
  r.job_hours = 180;    // 30 days x 6 h
  return r;
}

}  // namespace tokenmill
