// `tokenmill serve --device`: a device that is not one refuses to start, naming the flag and
// what it accepts; a GPU that cannot be used (none in a build without CUDA, or no such GPU)
// refuses with the reason instead of serving from the CPU behind the user's back. (Serving on
// the CPU with the default --device auto is what the Python server tests run.)
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda_availability.h"
#include "support/run_command.h"

namespace tokenmill {
namespace {

using testing::run_tokenmill;

const std::string kModel = std::string(TOKENMILL_FIXTURES_DIR) + "/hf/smollm_chat";

TEST(ServeDevice, AnUnknownDeviceIsRefused) {
  const auto r = run_tokenmill("serve -m " + kModel + " --port 0 --device tpu");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--device tpu: expected auto, cpu, cuda or cuda:N"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("serving "), std::string::npos) << r.output;
}

TEST(ServeDevice, AGpuThatCannotBeUsedIsRefusedWithTheReason) {
  const auto r = run_tokenmill("serve -m " + kModel + " --port 0 --device cuda:4096");
#ifdef TOKENMILL_HAS_CUDA
  const char* reason = "";  // no driver, no usable GPU, or "GPU 4096 does not exist": the machine decides
#else
  const char* reason = kNoCudaBackend;
#endif
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(std::string("--device cuda:4096: ") + reason), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("serving "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tokenmill
