// The worked example of `cost --example`, every number checked by hand: a month of fine-tuning at
// 6 h/day (180 h) on a 700 W machine at 0.6 per kWh, three-year amortisation, owned vs a
// rented GPU, with the H100 SXM preset's purchase price (30000) and cloud price (3.78/GPU-h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cost/cost_format.h"
#include "cost/cost_request.h"
#include "cost/worked_example.h"

namespace tokenmill {
namespace {

using ::testing::HasSubstr;

CostReport example() { return compute_cost(resolve_cost_request(worked_example_request())); }

TEST(WorkedExample, UsesTheH100SxmPreset) {
  const CostReport r = example();
  ASSERT_NE(r.inputs.preset, nullptr);
  EXPECT_EQ(r.inputs.preset->key, "h100-sxm");
  EXPECT_DOUBLE_EQ(r.inputs.owned->purchase_price, 30000);
  EXPECT_DOUBLE_EQ(r.inputs.cloud->price_per_gpu_hour, 3.78);
  EXPECT_DOUBLE_EQ(r.inputs.owned->utilisation, 0.25);  // 6 h / 24 h
}

TEST(WorkedExample, HourlyCosts) {
  const CostReport r = example();
  // amortisation: 30000 / (3 y x 8760 h x 0.25) = 30000 / 6570 = 4.56621 per useful hour
  EXPECT_NEAR(r.owned_hourly->amortisation, 4.566210045662, 1e-9);
  // energy: 0.7 kW x 0.6 = 0.42 per hour
  EXPECT_NEAR(r.owned_hourly->energy, 0.42, 1e-12);
  EXPECT_DOUBLE_EQ(*r.cloud_hourly, 3.78);
}

TEST(WorkedExample, MonthOfFineTuning) {
  const CostReport r = example();
  ASSERT_TRUE(r.job);
  EXPECT_DOUBLE_EQ(r.job->hours, 180);
  // amortisation share: 180 h x 30000 / 6570 = 5400000 / 6570 = 821.92 (the 180 useful hours
  // at 25% utilisation are 720 wall-clock hours: 30000 x 720 / 26280 is the same number).
  EXPECT_NEAR(r.job->owned->amortisation, 821.917808219, 1e-6);
  // energy: 180 h x 0.7 kW x 0.6 = 75.6
  EXPECT_NEAR(r.job->owned->energy, 75.6, 1e-9);
  EXPECT_DOUBLE_EQ(r.job->owned->other, 0.0);
  // owned total: 821.917808 + 75.6 = 897.517808
  EXPECT_NEAR(r.job->owned->total(), 897.517808219, 1e-6);
  // cloud: 180 h x 3.78 = 680.4
  EXPECT_NEAR(*r.job->cloud, 680.4, 1e-9);
}

TEST(WorkedExample, BreakEven) {
  const CostReport r = example();
  ASSERT_TRUE(r.break_even);
  // 6 h/day x 365 / 12 = 182.5 h a month; saving (3.78 - 0.42) x 182.5 = 613.2 a month;
  // 30000 / 613.2 = 48.9237 months: after the 36-month amortisation period.
  EXPECT_DOUBLE_EQ(r.break_even->hours_per_month, 182.5);
  EXPECT_NEAR(*r.break_even->months, 48.923679061, 1e-6);
  EXPECT_FALSE(r.break_even->within_amortisation);
}

TEST(WorkedExample, TableShowsTheNumbersAndTheirArithmetic) {
  const std::string text = to_text(example());
  EXPECT_THAT(text, HasSubstr("821.92"));
  EXPECT_THAT(text, HasSubstr("75.60"));
  EXPECT_THAT(text, HasSubstr("897.52"));
  EXPECT_THAT(text, HasSubstr("680.40"));
  EXPECT_THAT(text, HasSubstr("180 h x 0.7 kW x 0.6"));
  EXPECT_THAT(text, HasSubstr("48.92 months"));
  EXPECT_THAT(text, HasSubstr("editable defaults"));
  EXPECT_THAT(text, HasSubstr("preset H100 SXM"));
}

TEST(WorkedExample, FlagsOnTopReplaceItsFields) {
  CostRequest cheaper_power;
  cheaper_power.kwh_price = 0.3;
  const CostReport r =
      compute_cost(resolve_cost_request(with_defaults(cheaper_power, worked_example_request())));
  EXPECT_NEAR(r.job->owned->energy, 37.8, 1e-9);  // 180 h x 0.7 kW x 0.3
  EXPECT_DOUBLE_EQ(r.job->hours, 180);
}

}  // namespace
}  // namespace tokenmill
