// From flags to inputs: preset defaults scaled to --gpus, flags overriding them, the owned
// side left out (with a note) when a figure is missing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cost/cost_request.h"

namespace tokenmill {
namespace {

using ::testing::HasSubstr;

TEST(CostRequest, PresetFiguresAreMultipliedByGpus) {
  CostRequest r;
  r.preset = "h100-sxm";
  r.gpus = 8;
  r.kwh_price = 0.2;
  const CostInputs in = resolve_cost_request(r);
  EXPECT_DOUBLE_EQ(in.owned->purchase_price, 8 * 30000.0);
  EXPECT_DOUBLE_EQ(in.owned->power_watts, 8 * 700.0);
  EXPECT_DOUBLE_EQ(in.cloud->price_per_gpu_hour, 3.78);
  EXPECT_EQ(in.cloud->gpus, 8);
  EXPECT_DOUBLE_EQ(in.owned->amortisation_years, 3);
  EXPECT_DOUBLE_EQ(in.owned->utilisation, 1.0);  // 24 h/day by default
}

TEST(CostRequest, FlagsOverrideEachPresetField) {
  CostRequest r;
  r.preset = "rtx4090";
  r.purchase_price = 3000;
  r.power_watts = 600;
  r.gpu_hour_price = 0.5;
  r.kwh_price = 0.3;
  r.hours_per_day = 12;
  const CostInputs in = resolve_cost_request(r);
  EXPECT_DOUBLE_EQ(in.owned->purchase_price, 3000);
  EXPECT_DOUBLE_EQ(in.owned->power_watts, 600);
  EXPECT_DOUBLE_EQ(in.cloud->price_per_gpu_hour, 0.5);
  EXPECT_DOUBLE_EQ(in.owned->utilisation, 0.5);  // 12 h / 24 h
}

TEST(CostRequest, OwnedSideNeedsAnElectricityPrice) {
  CostRequest r;
  r.preset = "h200";
  const CostInputs in = resolve_cost_request(r);
  EXPECT_FALSE(in.owned);
  ASSERT_TRUE(in.cloud);
  ASSERT_EQ(in.notes.size(), 1u);
  EXPECT_THAT(in.notes[0], HasSubstr("give --kwh-price"));
}

TEST(CostRequest, CloudOnlyWithoutPreset) {
  CostRequest r;
  r.gpu_hour_price = 2.0;
  r.tokens_per_s = 100;
  r.phase = "decode";
  const CostInputs in = resolve_cost_request(r);
  EXPECT_FALSE(in.owned);
  ASSERT_EQ(in.throughputs.size(), 1u);
  EXPECT_EQ(in.throughputs[0].phase, "decode");
  EXPECT_EQ(in.throughputs[0].source, "--tokens-per-s");
}

TEST(CostRequest, CurrencyIsALabelThatPresetPricesDoNotFollow) {
  CostRequest r;
  r.preset = "h100-sxm";
  r.currency = "EUR";
  const CostInputs in = resolve_cost_request(r);
  EXPECT_EQ(in.currency, "EUR");
  EXPECT_DOUBLE_EQ(in.cloud->price_per_gpu_hour, 3.78);
  EXPECT_THAT(in.notes.back(), HasSubstr("US dollars"));
}

TEST(CostRequest, WithDefaultsKeepsWhatTheUserGave) {
  CostRequest user;
  user.kwh_price = 0.1;
  CostRequest base;
  base.kwh_price = 0.6;
  base.years = 5;
  const CostRequest r = with_defaults(user, base);
  EXPECT_DOUBLE_EQ(*r.kwh_price, 0.1);
  EXPECT_DOUBLE_EQ(*r.years, 5);
  EXPECT_FALSE(r.preset);
}

}  // namespace
}  // namespace tokenmill
