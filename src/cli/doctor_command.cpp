#include <fmt/format.h>

#include "cli/commands.h"
#include "doctor/doctor.h"

namespace tokenmill::cli {

void add_doctor_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "doctor",
      "Check this machine: host, CPU, NVIDIA driver and libraries, a quick self-test; exit 1 if not ready");
  auto json = std::make_shared<bool>(false);
  auto require_gpu = std::make_shared<bool>(false);
  auto no_self_test = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print one JSON object with every fact and finding");
  cmd->add_flag("--require-gpu", *require_gpu, "Treat \"no usable GPU\" as a blocking failure");
  cmd->add_flag("--no-self-test", *no_self_test, "Skip the CPU GEMM and attention self-test");
  cmd->callback([json, require_gpu, no_self_test] {
    doctor::DoctorOptions options = doctor::doctor_options_from_environment();
    options.require_gpu = *require_gpu;
    options.self_test = !*no_self_test;
    const doctor::DoctorReport report = doctor::run_doctor(options);
    fmt::print("{}", *json ? doctor::to_json(report).dump(2) + "\n" : doctor::to_text(report));
    command_exit_status() = doctor::doctor_exit_status(report);
  });
}

}  // namespace tokenmill::cli
