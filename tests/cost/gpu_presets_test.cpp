// GPU presets: every figure is positive and names its source; names and device names match.
#include <gtest/gtest.h>

#include "cost/gpu_presets.h"
#include "support/expect_error.h"

namespace tokenmill {
namespace {

TEST(GpuPresets, EveryFigureIsPositiveAndSourced) {
  ASSERT_EQ(gpu_presets().size(), 4u);
  for (const GpuPreset& p : gpu_presets()) {
    SCOPED_TRACE(std::string(p.name));
    for (const SourcedValue* v : {&p.purchase_price, &p.board_power_watts, &p.cloud_price_per_gpu_hour}) {
      EXPECT_GT(v->value, 0);
      EXPECT_GT(v->source.size(), 20u);
    }
    if (p.machine_power_watts) {
      EXPECT_GT(p.machine_power_watts->value, p.board_power_watts.value);
    }
    EXPECT_FALSE(p.device_name_parts.empty());
  }
}

TEST(GpuPresets, FoundByKeyOrNameIgnoringCaseSpacesAndDashes) {
  EXPECT_EQ(&find_gpu_preset("h100-sxm"), &find_gpu_preset("H100 SXM"));
  EXPECT_EQ(&find_gpu_preset("h100sxm"), &find_gpu_preset("H100-SXM"));
  EXPECT_EQ(find_gpu_preset("RTX 4090").key, "rtx4090");
  EXPECT_EQ(find_gpu_preset("a100-80gb").name, "A100 80GB SXM");
  EXPECT_EQ(find_gpu_preset("h200").board_power_watts.value, 700);
}

TEST(GpuPresets, UnknownNameListsTheKnownOnes) {
  testing::expect_error([] { find_gpu_preset("b200"); },
                        {"--preset b200", "unknown GPU preset", "rtx4090", "a100-80gb", "h100-sxm", "h200"});
}

TEST(GpuPresets, DeviceNamesAsNvidiaSmiReportsThem) {
  EXPECT_EQ(match_gpu_preset("NVIDIA GeForce RTX 4090")->key, "rtx4090");
  EXPECT_EQ(match_gpu_preset("NVIDIA A100-SXM4-80GB")->key, "a100-80gb");
  EXPECT_EQ(match_gpu_preset("NVIDIA H100 80GB HBM3")->key, "h100-sxm");
  EXPECT_EQ(match_gpu_preset("NVIDIA H200")->key, "h200");
  EXPECT_EQ(match_gpu_preset("NVIDIA H100 PCIe"), nullptr);  // another board, other figures
  EXPECT_EQ(match_gpu_preset("NVIDIA A100-PCIE-40GB"), nullptr);
  EXPECT_EQ(match_gpu_preset("AMD EPYC 9R14 96-Core Processor"), nullptr);
}

}  // namespace
}  // namespace tokenmill
