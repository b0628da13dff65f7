// `tokenmill doctor` as a user runs it: on this machine, with no GPU libraries at all, and
// with a faked old GPU stack (TOKENMILL_DOCTOR_LIB_PATH points the library search there).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "doctor/build_expectations.h"
#include "support/run_command.h"
#include "support/scoped_env.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using tokenmill::doctor::kBuildHasCudaBackend;
using tokenmill::testing::CommandResult;
using tokenmill::testing::ScopedEnv;
using tokenmill::testing::TempDir;

CommandResult run(const std::string& args) {
  return tokenmill::testing::run_tokenmill(args, /*with_stderr=*/false);
}

TEST(DoctorCli, ThisMachine) {
  const CommandResult text = run("doctor");
  for (const char* section : {"\nHost\n", "\nCPU\n", "\nGPU stack\n", "\nSelf-test\n", "\nVerdict\n"})
    EXPECT_THAT(text.output, HasSubstr(section));
  EXPECT_THAT(text.output,
              HasSubstr(kBuildHasCudaBackend ? "built (self-tested on each GPU" : "not in this build"));
  EXPECT_THAT(text.output, Not(HasSubstr("error:")));

  const CommandResult json_run = run("doctor --json");
  const auto report = nlohmann::json::parse(json_run.output);
  EXPECT_EQ(json_run.exit_code, report["exit_status"].get<int>());
  EXPECT_EQ(text.exit_code, json_run.exit_code);
  EXPECT_EQ(report["gpu"]["cuda_backend"], kBuildHasCudaBackend);
  ASSERT_EQ(report["self_test"].size(), 2u);
  for (const auto& t : report["self_test"]) EXPECT_TRUE(t["passed"].get<bool>()) << t.dump();
  if (!report["gpu"]["driver"]["loaded"].get<bool>()) {
    // A machine without the NVIDIA driver (this project's build machine): ready, no GPU.
    EXPECT_EQ(json_run.exit_code, 0) << text.output;
    EXPECT_THAT(text.output, HasSubstr("libcuda.so.1"));
    EXPECT_THAT(text.output, HasSubstr("no usable GPU"));
  }
}

TEST(DoctorCli, NoGpuLibrariesIsReadyUnlessAGpuIsRequired) {
  const TempDir empty;
  const ScopedEnv lib_path("TOKENMILL_DOCTOR_LIB_PATH", empty.path().c_str());
  const CommandResult ready = run("doctor --no-self-test");
  EXPECT_EQ(ready.exit_code, 0) << ready.output;
  EXPECT_THAT(ready.output, HasSubstr("ready for CPU work"));
  const CommandResult required = run("doctor --no-self-test --require-gpu");
  EXPECT_EQ(required.exit_code, 1) << required.output;
  EXPECT_THAT(required.output, HasSubstr("\nnot ready (driver): "));
  EXPECT_THAT(required.output, Not(HasSubstr("error:")));
}

TEST(DoctorCli, OldGpuStackExitsNonZeroWithTheFix) {
  const ScopedEnv lib_path("TOKENMILL_DOCTOR_LIB_PATH", TOKENMILL_FAKE_GPU_DIR "/old");
  const CommandResult r = run("doctor --no-self-test --json");
  const auto report = nlohmann::json::parse(r.output);
  // The verdicts compare with the versions recorded at configure time: a build configured
  // without a CUDA toolkit has none, and then a CUDA 11.8 stack is no mismatch.
  const bool recorded = !report["gpu"]["build_expects"]["cuda"].is_null();
  EXPECT_EQ(r.exit_code, recorded ? 1 : 0);
  EXPECT_EQ(report["ready"], !recorded);
  EXPECT_EQ(report["gpu"]["devices"][0]["name"], "Tesla T4");
  EXPECT_EQ(report["gpu"]["devices"][0]["bf16_tensor_cores"], false);
  EXPECT_EQ(report["gpu"]["libraries"]["cudnn"]["version"], "8.9.7");
}

}  // namespace
