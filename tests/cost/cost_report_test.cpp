// Cost per million tokens, job cost and break-even, checked by hand.
#include <gtest/gtest.h>

#include "cost/cost_report.h"

namespace tokenmill {
namespace {

TEST(CostReport, CostPerMillionTokens) {
  // 3.6 per hour / (1000 tok/s x 3600 s) x 1e6 = 1.0 per million tokens.
  EXPECT_DOUBLE_EQ(cost_per_million_tokens(3.6, 1000), 1.0);
  // 2.0 / (50 x 3600) x 1e6 = 11.111...
  EXPECT_NEAR(cost_per_million_tokens(2.0, 50), 11.1111111, 1e-6);
}

TEST(CostReport, HoursPerMonthIsAYearOverTwelve) {
  EXPECT_DOUBLE_EQ(hours_per_month(6), 182.5);  // 6 x 365 / 12
  EXPECT_DOUBLE_EQ(hours_per_month(24), 730.0);
}

TEST(CostReport, BreakEvenMonths) {
  const CloudPrice cloud{.price_per_gpu_hour = 2.0, .gpus = 1};
  OwnedMachine owned{.purchase_price = 10950, .power_watts = 1000, .kwh_price = 0.5};
  // 12 h/day: 365 h/month; energy 1 kW x 0.5 = 0.5 per hour;
  // saving per month (2.0 - 0.5) x 365 = 547.5; 10950 / 547.5 = 20 months.
  EXPECT_DOUBLE_EQ(*break_even_months(cloud, owned, 12), 20.0);
  // Other costs of 1314 a year take 109.5 a month: 10950 / (547.5 - 109.5) = 10950 / 438 = 25.
  owned.other_per_year = 1314;
  EXPECT_DOUBLE_EQ(*break_even_months(cloud, owned, 12), 25.0);
}

TEST(CostReport, NeverBreaksEvenWhenRunningCostReachesTheRent) {
  const OwnedMachine owned{.purchase_price = 1000, .power_watts = 1000, .kwh_price = 0.5};  // 0.5 per hour
  EXPECT_FALSE(break_even_months(CloudPrice{.price_per_gpu_hour = 0.4}, owned, 8));
  EXPECT_FALSE(break_even_months(CloudPrice{.price_per_gpu_hour = 0.5}, owned, 8));  // equal: never
  EXPECT_TRUE(break_even_months(CloudPrice{.price_per_gpu_hour = 0.6}, owned, 8));
}

TEST(CostReport, PerMillionTokensAndJobFromTokens) {
  CostInputs in;
  in.cloud = CloudPrice{.price_per_gpu_hour = 1.8, .gpus = 2};  // 3.6 per hour
  in.owned = OwnedMachine{.purchase_price = 8760,
                          .amortisation_years = 1,
                          .power_watts = 2000,
                          .kwh_price = 0.1,
                          .utilisation = 1};  // 1.0 + 0.2 = 1.2 per hour
  in.throughputs = {{.phase = "train", .batch = 4, .tokens_per_s = 500, .source = "test"}};
  in.job_tokens = 3.6e6;  // 3.6e6 / (500 tok/s x 3600 s) = 2 h
  const CostReport r = compute_cost(in);
  ASSERT_EQ(r.phases.size(), 1u);
  EXPECT_DOUBLE_EQ(*r.phases[0].cloud_per_million, 2.0);          // 3.6 / (500 x 3600) x 1e6
  EXPECT_NEAR(*r.phases[0].owned_per_million, 1.2 / 1.8, 1e-12);  // 1.2 / (500 x 3600) x 1e6
  ASSERT_TRUE(r.job);
  EXPECT_DOUBLE_EQ(r.job->hours, 2.0);
  EXPECT_DOUBLE_EQ(*r.job->cloud, 7.2);               // 2 h x 3.6
  EXPECT_DOUBLE_EQ(r.job->owned->amortisation, 2.0);  // 2 h x 1.0
  EXPECT_NEAR(r.job->owned->energy, 0.4, 1e-12);      // 2 h x 2 kW x 0.1
  ASSERT_TRUE(r.break_even);
  // 24 h/day: 730 h/month; (3.6 - 0.2) x 730 = 2482 a month; 8760 / 2482 = 3.5294 months.
  EXPECT_NEAR(*r.break_even->months, 8760.0 / 2482.0, 1e-12);
  EXPECT_TRUE(r.break_even->within_amortisation);  // 3.53 <= 12 months
}

TEST(CostReport, OneSideOnly) {
  CostInputs in;
  in.cloud = CloudPrice{.price_per_gpu_hour = 2.0};
  in.job_hours = 10;
  const CostReport r = compute_cost(in);
  EXPECT_DOUBLE_EQ(*r.job->cloud, 20.0);
  EXPECT_FALSE(r.job->owned);
  EXPECT_FALSE(r.break_even);
}

}  // namespace
}  // namespace tokenmill
