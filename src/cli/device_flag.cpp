#include "cli/device_flag.h"

#include <fmt/format.h>

#include "runtime/device_choice.h"

namespace tokenmill::cli {

void add_device_flag(CLI::App& command, std::string& device) {
  command
      .add_option("--device", device,
                  "auto (a GPU when one can run the model, else the CPU), cpu, cuda or cuda:N")
      ->capture_default_str();
}

std::unique_ptr<Backend> open_device(const std::string& device, Model& model) {
  DeviceChoice choice = choose_device(device, model);
  if (!choice.note.empty()) fmt::print(stderr, "note: {}\n", choice.note);
  return std::move(choice.backend);
}

}  // namespace tokenmill::cli
