// Hourly costs of renting and owning, checked by hand.
#include <gtest/gtest.h>

#include "cost/price_model.h"

namespace tokenmill {
namespace {

TEST(PriceModel, CloudIsPricePerGpuHourTimesGpus) {
  // 3.78 per GPU-hour x 8 GPUs = 30.24 per hour.
  EXPECT_DOUBLE_EQ(hourly_cost(CloudPrice{.price_per_gpu_hour = 3.78, .gpus = 8}), 30.24);
}

TEST(PriceModel, OwnedUsefulHourByPart) {
  const OwnedMachine owned{.purchase_price = 26280,
                           .amortisation_years = 3,
                           .power_watts = 500,
                           .kwh_price = 0.2,
                           .utilisation = 0.5,
                           .other_per_year = 876};
  const OwnedHourly h = hourly_cost(owned);
  EXPECT_DOUBLE_EQ(h.amortisation, 2.0);  // 26280 / (3 y x 8760 h x 0.5) = 26280 / 13140
  EXPECT_DOUBLE_EQ(h.energy, 0.1);        // 500 W / 1000 x 0.2 per kWh
  EXPECT_DOUBLE_EQ(h.other, 0.2);         // 876 / (8760 h x 0.5) = 876 / 4380
  EXPECT_DOUBLE_EQ(h.total(), 2.3);
}

TEST(PriceModel, FullUtilisationSpreadsThePurchaseOverEveryHour) {
  // 8760 / (1 y x 8760 h x 1.0) = 1 per hour; no power, no other costs.
  const OwnedHourly h = hourly_cost(OwnedMachine{.purchase_price = 8760, .amortisation_years = 1});
  EXPECT_DOUBLE_EQ(h.amortisation, 1.0);
  EXPECT_DOUBLE_EQ(h.energy, 0.0);
  EXPECT_DOUBLE_EQ(h.total(), 1.0);
}

}  // namespace
}  // namespace tokenmill
